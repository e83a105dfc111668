package main

// The signalling socket: GET /signal?ticket=… upgraded to a WebSocket carrying JSON text frames.
// The SFU sends welcome, then offers and candidates; the client sends answers, candidates and
// leave. Refusals (bad ticket, peer id taken, room or node full) are plain HTTP answers before the
// upgrade, so the gateway and clients see a status code rather than a socket that closes.

import (
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"
)

const (
	pingEvery   = 15 * time.Second
	pongTimeout = 45 * time.Second // three missed pings
	writeWait   = 10 * time.Second
	// Offers, answers and candidates per socket: a burst covers a connection's setup (an answer
	// and a dozen candidates, several times over), the rate any sane renegotiation.
	rateBurst = 40
	ratePerS  = 10
)

var errNoOffer = errors.New("no offer is outstanding")

// Frames. Each has its own type so that every field the contract names is always present.
type participantRef struct {
	PeerID string `json:"peer_id"`
	User   string `json:"user"`
}

type welcomeFrame struct {
	Type         string           `json:"type"`
	PeerID       string           `json:"peer_id"`
	Room         string           `json:"room"`
	Participants []participantRef `json:"participants"`
	ICEServers   []iceServer      `json:"ice_servers"`
}

type sdpFrame struct {
	Type string `json:"type"`
	SDP  string `json:"sdp"`
}

type candidateJSON struct {
	Candidate     string  `json:"candidate"`
	SDPMid        *string `json:"sdpMid"`
	SDPMLineIndex *uint16 `json:"sdpMLineIndex"`
}

type candidateFrame struct {
	Type      string        `json:"type"`
	Candidate candidateJSON `json:"candidate"`
}

type participantFrame struct {
	Type   string `json:"type"`
	PeerID string `json:"peer_id"`
	User   string `json:"user"`
}

type mutedFrame struct {
	Type  string `json:"type"`
	Muted bool   `json:"muted"`
}

type typeFrame struct {
	Type string `json:"type"`
}

type errorFrame struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// inFrame is any client frame.
type inFrame struct {
	Type      string                   `json:"type"`
	SDP       string                   `json:"sdp"`
	Candidate *webrtc.ICECandidateInit `json:"candidate"`
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	// Any origin: the ticket in the URL is the credential, and the gateway proxies the socket.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (s *sfu) serveSignal(w http.ResponseWriter, r *http.Request) {
	tk, err := openTicket(s.ticket, r.URL.Query().Get("ticket"), time.Now())
	if err != nil {
		log.Printf("sfu signal refused from %s: %v", r.RemoteAddr, err)
		httpError(w, http.StatusUnauthorized, "UNAUTHORIZED", "invalid or expired ticket")
		return
	}
	p, ice, err := s.newPeer(tk)
	if err != nil {
		log.Printf("sfu peer connection for %s: %v", tk.Peer, err)
		httpError(w, http.StatusInternalServerError, "INTERNAL", "could not create the peer connection")
		return
	}
	if err := s.rooms.admit(p); err != nil {
		p.closed.Store(true) // never in the room: nothing to undo or report
		_ = p.pc.Close()
		switch {
		case errors.Is(err, errConflict):
			httpError(w, http.StatusConflict, "CONFLICT", err.Error())
		default:
			w.Header().Set("Retry-After", "5")
			httpError(w, http.StatusServiceUnavailable, "ROOM_FULL", err.Error())
		}
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade has answered the request already.
		p.close(reasonFailed, 0, "")
		return
	}
	ws.SetReadLimit(s.cfg.maxFrame)
	p.outMu.Lock()
	p.ws = ws
	p.outMu.Unlock()
	go p.writer(ws)
	if !s.join(p, ice) {
		return // closed while upgrading (a kick, or shutdown): the writer closes the socket
	}
	log.Printf("sfu join ns=%q room=%q peer=%q user=%q device=%q muted=%t", p.key.ns, p.key.name, p.id, p.user,
		p.device, p.muted.Load())
	p.start()
	p.readLoop(ws)
}

// writer is the socket's only writer: queued frames, pings, and at the end the close frame.
func (p *peer) writer(ws *websocket.Conn) {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case data := <-p.out:
			_ = ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := ws.WriteMessage(websocket.TextMessage, data); err != nil {
				_ = ws.Close()
				p.close(reasonLeft, 0, "")
				return
			}
		case <-ping.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				_ = ws.Close()
				p.close(reasonLeft, 0, "")
				return
			}
		case <-p.done:
			p.flushAndClose(ws)
			return
		}
	}
}

// flushAndClose writes what was queued before the close (a kicked or error frame), then the close
// frame, within a second.
func (p *peer) flushAndClose(ws *websocket.Conn) {
	deadline := time.Now().Add(time.Second)
	_ = ws.SetWriteDeadline(deadline)
	for flushing := true; flushing; {
		select {
		case data := <-p.out:
			if ws.WriteMessage(websocket.TextMessage, data) != nil {
				flushing = false
			}
		default:
			flushing = false
		}
	}
	p.outMu.Lock()
	code, text := p.closeCode, p.closeText
	p.outMu.Unlock()
	if code != 0 {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), deadline)
	}
	// Closing while the client's frames are still unread would reset the connection, and the
	// client would lose the close frame (it sees 1006): let the reader take the client's close
	// reply, or whatever it still sends, first.
	select {
	case <-p.readDone:
	case <-time.After(time.Second):
	}
	_ = ws.Close()
}

// readLoop handles the client's frames until the socket ends. Once the peer is closed it reads on,
// discarding, until the client answers the close frame (see flushAndClose).
func (p *peer) readLoop(ws *websocket.Conn) {
	defer close(p.readDone)
	_ = ws.SetReadDeadline(time.Now().Add(pongTimeout))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(pongTimeout)) })
	limit := bucket{tokens: rateBurst, last: time.Now()}
	for {
		kind, data, err := ws.ReadMessage()
		if err != nil {
			p.close(readEndReason(err), 0, "")
			var closeFrame *websocket.CloseError
			if !errors.As(err, &closeFrame) {
				drain(ws)
			}
			return
		}
		if p.closed.Load() {
			continue
		}
		var f inFrame
		if kind != websocket.TextMessage || json.Unmarshal(data, &f) != nil {
			p.fail("VALIDATION_FAILED", "frames are JSON text objects", websocket.CloseUnsupportedData)
			continue
		}
		switch f.Type {
		case "answer", "candidate", "offer":
			if !limit.allow(time.Now()) {
				p.fail("RATE_LIMITED", "too many signalling frames", websocket.ClosePolicyViolation)
				continue
			}
		}
		switch f.Type {
		case "answer":
			if f.SDP == "" {
				p.sendError("VALIDATION_FAILED", "an answer needs sdp")
			} else if err := p.answer(f.SDP); err != nil {
				p.sendError("VALIDATION_FAILED", "answer refused: "+err.Error())
			}
		case "candidate":
			if f.Candidate == nil {
				p.sendError("VALIDATION_FAILED", "a candidate frame needs candidate")
			} else if err := p.candidate(*f.Candidate); err != nil {
				p.sendError("VALIDATION_FAILED", "candidate refused: "+err.Error())
			}
		case "leave":
			p.close(reasonLeft, websocket.CloseNormalClosure, "left")
		case "offer":
			p.sendError("VALIDATION_FAILED", "the SFU makes the offers; the client answers them")
		default:
			p.sendError("VALIDATION_FAILED", "unknown frame type")
		}
	}
}

// drain discards what the client still sends after a read error, until it closes its side or a
// second passes: after an oversized frame (gorilla has sent 1009) the rest of that frame is unread,
// and closing over unread data would reset the connection before the client reads the 1009.
func drain(ws *websocket.Conn) {
	conn := ws.NetConn()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, conn)
}

// readEndReason: a socket that went silent or sent an oversized frame failed; one that closed
// (cleanly or not) left.
func readEndReason(err error) string {
	var ne net.Error
	if errors.Is(err, websocket.ErrReadLimit) || (errors.As(err, &ne) && ne.Timeout()) {
		return reasonFailed
	}
	return reasonLeft
}

func (p *peer) sendError(code, message string) {
	p.send(errorFrame{Type: "error", Code: code, Message: message})
}

// fail sends an error frame and closes the socket with closeCode.
func (p *peer) fail(code, message string, closeCode int) {
	p.sendError(code, message)
	p.close(reasonFailed, closeCode, message)
}

// bucket is a token bucket: rateBurst tokens, refilled at ratePerS.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) allow(now time.Time) bool {
	b.tokens = min(rateBurst, b.tokens+now.Sub(b.last).Seconds()*ratePerS)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
