package main

// The gateway's endpoints: /health (unauthenticated: it says nothing about any namespace), and
// /rooms, /control and /mux (mux.go), which take SFU_KEY as a bearer token. The SFU listens on loopback only; the
// gateway calls these on behalf of a namespace and passes its name, so each answer is confined to
// the namespace the gateway asked about.

import (
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"log"
	"net/http"
	"strings"
)

const controlMaxBody = 4 << 10

func httpError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]string{"error": message, "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *sfu) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		httpError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET only")
		return
	}
	rooms, peers := s.rooms.stats()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "rooms": rooms, "peers": peers})
}

// authorized checks "Authorization: Bearer <SFU_KEY hex>" in constant time (hex of either case).
func (s *sfu) authorized(r *http.Request) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, prefix) {
		return false
	}
	token, err := hex.DecodeString(strings.TrimSpace(h[len(prefix):]))
	return err == nil && subtle.ConstantTimeCompare(token, s.cfg.key) == 1
}

// gatewayCall answers a call without the bearer (401, checked first) or with another method than
// method (405), and says whether the call may go on.
func (s *sfu) gatewayCall(w http.ResponseWriter, r *http.Request, method string) bool {
	if !s.authorized(r) {
		httpError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bearer token required")
		return false
	}
	if r.Method != method {
		httpError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", method+" only")
		return false
	}
	return true
}

func (s *sfu) serveRooms(w http.ResponseWriter, r *http.Request) {
	if !s.gatewayCall(w, r, http.MethodGet) {
		return
	}
	ns := r.URL.Query().Get("ns")
	if ns == "" {
		httpError(w, http.StatusBadRequest, "VALIDATION_FAILED", "ns is required")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"rooms": s.rooms.list(ns)})
}

type controlRequest struct {
	NS     string `json:"ns"`
	Room   string `json:"room"`
	User   string `json:"user"`
	Peer   string `json:"peer"`
	Action string `json:"action"`
}

// serveControl kicks, mutes or unmutes the peers of one room that match user or peer, closes a
// handed peer whose credential was revoked, or ends every room of a namespace.
func (s *sfu) serveControl(w http.ResponseWriter, r *http.Request) {
	if !s.gatewayCall(w, r, http.MethodPost) {
		return
	}
	var req controlRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, controlMaxBody)).Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "VALIDATION_FAILED", "body must be a JSON object of at most 4 KiB")
		return
	}
	// "end" closes every peer of the namespace, in every room: its media turned off or the
	// namespace deleted
	if req.Action == "end" && req.NS != "" && req.Room == "" && req.User == "" && req.Peer == "" {
		peers := s.rooms.ofNamespace(req.NS)
		for _, p := range peers {
			p.send(typeFrame{Type: "ended"})
			p.close(reasonKicked, 1000, "ended")
		}
		log.Printf("sfu control ns=%q action=end affected=%d", req.NS, len(peers))
		writeJSON(w, http.StatusOK, map[string]int{"affected": len(peers)})
		return
	}
	switch {
	case req.NS == "" || req.Room == "":
		httpError(w, http.StatusBadRequest, "VALIDATION_FAILED", "ns and room are required")
		return
	case req.User == "" && req.Peer == "":
		httpError(w, http.StatusBadRequest, "VALIDATION_FAILED", "user or peer is required")
		return
	case req.Action == "revoke" && req.Peer == "":
		httpError(w, http.StatusBadRequest, "VALIDATION_FAILED", "revoke names a peer")
		return
	case req.Action != "kick" && req.Action != "mute" && req.Action != "unmute" && req.Action != "revoke":
		httpError(w, http.StatusBadRequest, "VALIDATION_FAILED", "action must be kick, mute, unmute or revoke")
		return
	}
	peers := s.rooms.match(roomKey{req.NS, req.Room}, req.User, req.Peer)
	for _, p := range peers {
		switch req.Action {
		case "kick":
			p.send(typeFrame{Type: "kicked"})
			p.close(reasonKicked, 1000, "kicked")
		case "mute":
			p.setMuted(true)
		case "unmute":
			p.setMuted(false)
		case "revoke":
			// a socket the gateway handed over (handed.go), closed as the gateway closes its own
			// clients' sockets when their credential is revoked
			p.close(reasonLeft, 4401, "REVOKED: the credential was revoked or its session ended")
		}
	}
	log.Printf("sfu control ns=%q room=%q user=%q peer=%q action=%s affected=%d", req.NS, req.Room, req.User,
		req.Peer, req.Action, len(peers))
	writeJSON(w, http.StatusOK, map[string]int{"affected": len(peers)})
}
