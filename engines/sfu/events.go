package main

// Participant reports. On every join and leave the SFU reports an event to the gateway: on the
// gateway's channel while one is open (mux.go), else as a POST to SFU_EVENTS_URL. The gateway
// publishes it on the room's topic. Each body is
// MACed with the participant's event key from its ticket, so the gateway can check a report came
// from the SFU about that ticket; the random nonce lets it refuse a replayed report.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"sync"
	"time"
)

const (
	eventTries   = 3
	eventBackoff = time.Second
	eventTimeout = 5 * time.Second
)

type events struct {
	url    string
	node   string
	client *http.Client
	wg     sync.WaitGroup // reports in flight, for shutdown
	// the gateway's channel, while one is open: a report there costs a frame each way instead of
	// an HTTP request
	channel func() *channel
}

type event struct {
	Namespace string `json:"namespace"`
	Room      string `json:"room"`
	Event     string `json:"event"`
	PeerID    string `json:"peer_id"`
	User      string `json:"user"`
	Device    string `json:"device"`
	Node      string `json:"node"`
	At        int64  `json:"at"`
	Nonce     string `json:"nonce"`
	Reason    string `json:"reason"`
}

func newEvents(url, node string, channel func() *channel) *events {
	return &events{url: url, node: node, client: &http.Client{Timeout: eventTimeout}, channel: channel}
}

// post reports a join or leave of p without blocking the caller (signalling holds locks while it
// reports). One peer's reports are delivered in order: a leave waits for its join.
func (e *events) post(p *peer, kind, reason string) {
	if e.url == "" {
		return
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	body, err := json.Marshal(event{Namespace: p.key.ns, Room: p.key.name, Event: kind, PeerID: p.id, User: p.user,
		Device: p.device, Node: e.node, At: time.Now().UnixMilli(), Nonce: hex.EncodeToString(nonce), Reason: reason})
	if err != nil {
		return
	}
	mac := hmac.New(sha256.New, p.eventKey)
	mac.Write(body)
	sig := hex.EncodeToString(mac.Sum(nil))

	p.evMu.Lock()
	prev, done := p.lastEvent, make(chan struct{})
	p.lastEvent = done
	p.evMu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		// A join is reported once its welcome left: the report's round trip to the gateway, on
		// the same machine, does not compete with the client's handshake and welcome.
		if kind == "join" {
			select {
			case <-p.welcomed:
			case <-p.done:
			}
		}
		e.deliver(body, sig, kind, p.id)
	}()
}

// deliver sends one report: up to eventTries tries, eventBackoff apart, on a network error or a
// 5xx. A 4xx is the gateway refusing the report; trying again would not change its mind.
func (e *events) deliver(body []byte, sig, kind, peerID string) {
	for try := 1; try <= eventTries; try++ {
		if try > 1 {
			time.Sleep(eventBackoff)
		}
		status, err := e.once(body, sig)
		switch {
		case err == nil && status < 300:
			return
		case err == nil && status < 500:
			log.Printf("sfu event %s of %s refused: HTTP %d", kind, peerID, status)
			return
		case err == nil:
			log.Printf("sfu event %s of %s: HTTP %d (try %d of %d)", kind, peerID, status, try, eventTries)
		default:
			log.Printf("sfu event %s of %s: %v (try %d of %d)", kind, peerID, err, try, eventTries)
		}
	}
	log.Printf("sfu event %s of %s not delivered", kind, peerID)
}

func (e *events) once(body []byte, sig string) (int, error) {
	if ch := e.channel(); ch != nil {
		return ch.report(body, sig)
	}
	return e.postOnce(body, sig)
}

func (e *events) postOnce(body []byte, sig string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Portico-Webrtc-Mac", sig)
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// wait waits for the reports in flight, until the deadline.
func (e *events) wait(deadline time.Time) {
	if !waitUntil(&e.wg, deadline) {
		log.Printf("sfu events still in flight at exit")
	}
}
