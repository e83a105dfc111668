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
	// Any origin: the ticket in the URL is the credential (the gateway's channel is bearer-checked first).
	CheckOrigin: func(*http.Request) bool { return true },
}

func (s *sfu) serveSignal(w http.ResponseWriter, r *http.Request) {
	tk, err := openTicket(s.ticket, r.URL.Query().Get("ticket"), time.Now())
	if err != nil {
		log.Printf("sfu signal refused from %s: %v", r.RemoteAddr, err)
		httpError(w, http.StatusUnauthorized, "UNAUTHORIZED", "invalid or expired ticket")
		return
	}
	p, ice, no := s.enter(tk)
	if no != nil {
		if no.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		httpError(w, no.Status, no.Code, no.Error)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade has answered the request already.
		p.close(reasonFailed, 0, "")
		return
	}
	s.runSignal(p, ice, ws)
}

// runSignal runs a peer whose WebSocket is open: its writer, its place in the room, its reads.
func (s *sfu) runSignal(p *peer, ice []iceServer, ws *websocket.Conn) {
	ws.SetReadLimit(s.cfg.maxFrame)
	sock := wsSocket{ws}
	p.outMu.Lock()
	p.sock = sock
	p.outMu.Unlock()
	go p.writer(sock)
	if !s.join(p, ice) {
		return // closed while upgrading (a kick, or shutdown): the writer closes the socket
	}
	p.logJoin()
	p.start()
	p.readLoop(ws)
}

// refusal is why a join was not taken: an HTTP status and the API's code, as the signalling
// socket answers its handshake and the gateway's channel answers a join (mux.go).
type refusal struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Error  string `json:"error"`
}

// enter makes the ticket's peer connection and takes the peer into its room, or says why not.
func (s *sfu) enter(tk *ticket) (*peer, []iceServer, *refusal) {
	p, ice, err := s.newPeer(tk)
	if err != nil {
		log.Printf("sfu peer connection for %s: %v", tk.Peer, err)
		return nil, nil, &refusal{http.StatusInternalServerError, "INTERNAL", "could not create the peer connection"}
	}
	if err := s.rooms.admit(p); err != nil {
		p.closed.Store(true) // never in the room: nothing to undo or report
		_ = p.pc.Close()
		if errors.Is(err, errConflict) {
			return nil, nil, &refusal{http.StatusConflict, "CONFLICT", err.Error()}
		}
		return nil, nil, &refusal{http.StatusServiceUnavailable, "ROOM_FULL", err.Error()}
	}
	return p, ice, nil
}

func (p *peer) logJoin() {
	log.Printf("sfu join ns=%q room=%q peer=%q user=%q device=%q muted=%t", p.key.ns, p.key.name, p.id, p.user,
		p.device, p.muted.Load())
}

// signalSocket is where a peer's frames go: its own WebSocket (wsSocket) or a stream of the
// gateway's channel (mux.go). The peer's writer goroutine is its only writer.
type signalSocket interface {
	write(data []byte, deadline time.Time) error
	// keepalive pings a WebSocket; a stream has none (the gateway keeps its client's socket alive).
	keepalive() error
	closeFrame(code int, text string, deadline time.Time)
	forceClose()
}

type wsSocket struct{ ws *websocket.Conn }

func (w wsSocket) write(data []byte, deadline time.Time) error {
	_ = w.ws.SetWriteDeadline(deadline)
	return w.ws.WriteMessage(websocket.TextMessage, data)
}

func (w wsSocket) keepalive() error {
	return w.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait))
}

func (w wsSocket) closeFrame(code int, text string, deadline time.Time) {
	_ = w.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), deadline)
}

func (w wsSocket) forceClose() { _ = w.ws.Close() }

// writer is the socket's only writer: queued frames, pings, and at the end the close frame.
func (p *peer) writer(sock signalSocket) {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	defer p.markWelcomed()
	for {
		select {
		case data := <-p.out:
			if err := sock.write(data, time.Now().Add(writeWait)); err != nil {
				sock.forceClose()
				p.close(reasonLeft, 0, "")
				return
			}
			p.markWelcomed()
		case <-ping.C:
			if err := sock.keepalive(); err != nil {
				sock.forceClose()
				p.close(reasonLeft, 0, "")
				return
			}
		case <-p.done:
			p.flushAndClose(sock)
			return
		}
	}
}

// flushAndClose writes what was queued before the close (a kicked or error frame), then the close
// frame, within a second.
func (p *peer) flushAndClose(sock signalSocket) {
	deadline := time.Now().Add(time.Second)
	for flushing := true; flushing; {
		select {
		case data := <-p.out:
			if sock.write(data, deadline) != nil {
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
		sock.closeFrame(code, text, deadline)
	}
	// Closing while the client's frames are still unread would reset the connection, and the
	// client would lose the close frame (it sees 1006): let the reader take the client's close
	// reply, or whatever it still sends, first.
	select {
	case <-p.readDone:
	case <-time.After(time.Second):
	}
	sock.forceClose()
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
		p.handle(&limit, kind == websocket.TextMessage, data)
	}
}

// handle acts on one client frame, from the peer's own socket or its stream of the gateway's
// channel: the same checks and the same rate either way.
func (p *peer) handle(limit *bucket, text bool, data []byte) {
	if p.closed.Load() {
		return
	}
	var f inFrame
	if !text || json.Unmarshal(data, &f) != nil {
		p.fail("VALIDATION_FAILED", "frames are JSON text objects", websocket.CloseUnsupportedData)
		return
	}
	switch f.Type {
	case "answer", "candidate", "offer":
		if !limit.allow(time.Now()) {
			p.fail("RATE_LIMITED", "too many signalling frames", websocket.ClosePolicyViolation)
			return
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
