package main

// The gateway's channel: GET /mux with the SFU_KEY bearer, upgraded to one long-lived WebSocket
// over which the gateway's joins are multiplexed, so a join through the gateway costs one frame
// each way rather than a TCP connection and a WebSocket handshake of its own. Each join is a
// stream, numbered by the gateway; every channel frame is binary:
//
//	kind (1 byte) | stream id (4 bytes, big-endian) | payload
//
// From the gateway:
//
//	'J' join:   the join as a ticket holds it (JSON, exp left out: the channel is authenticated)
//	'T' text:   one text frame from the client
//	'B' binary: one binary frame from the client (refused, as on a socket of its own)
//	'E' end:    the client's socket ended; payload 1 byte, 1 when it failed (went silent, sent an
//	            oversized frame or read too slowly), 0 when it closed
//
// From the SFU:
//
//	'A' accept: the peer is in its room; payload its first frame (the welcome), its other frames
//	            follow
//	'R' refuse: {"status","code","error"} as /signal would have answered the handshake
//	'T' text:   one frame for the client
//	'C' close:  close the client's socket; payload the close code (2 bytes, big-endian) and reason
//	'V' event:  a participant report (events.go), numbered by the SFU in the id field; payload its
//	            MAC (64 hex characters), then its body
//
// And from the gateway, 'K' ack: the answer to report id; payload the status (2 bytes,
// big-endian) that POST /v1/internal/webrtc/events would have answered with.
//
// A stream is the same peer as a socket of its own: the same frame cap, rate and close codes. The
// gateway keeps its client's socket alive (pings) and tells the SFU when it went silent. The
// channel's reader never blocks on a peer: a stream's frames wait in a queue of their own, and a
// peer whose queue is full is closed (1008). Frames for the gateway wait in the channel's queue,
// which the gateway drains as they come; a stream that cannot write there within writeWait is
// closed, as a socket that cannot be written is. When the channel drops, its peers leave.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

const (
	muxJoin   = 'J'
	muxText   = 'T'
	muxBinary = 'B'
	muxEnd    = 'E'
	muxAccept = 'A'
	muxRefuse = 'R'
	muxClose  = 'C'
	muxEvent  = 'V'
	muxAck    = 'K'

	muxHeader = 5
	// A join is far smaller; a frame is at most maxFrame plus the header.
	muxSlack = 1024
	// Frames waiting for the gateway, over all streams.
	muxQueue = 1024
	// A stream's frames from the gateway waiting for their peer: more than the rate's burst.
	streamQueue = 64
)

type channel struct {
	s       *sfu
	ws      *websocket.Conn
	out     chan []byte
	lost    chan struct{} // closed when the channel's reader ends
	mu      sync.Mutex
	streams map[uint32]*stream
	acks    map[uint32]chan int // reports waiting for the gateway's answer
	reports atomic.Uint32
}

type inbound struct {
	kind byte
	data []byte
}

// stream is one join on the channel; as a signalSocket it is its peer's socket.
type stream struct {
	ch       *channel
	id       uint32
	inbox    chan inbound
	endOnce  sync.Once
	ended    chan struct{} // the gateway said end
	failed   atomic.Bool   // ... and that the client's socket failed
	closed   atomic.Bool   // the SFU sent close
	peer     atomic.Pointer[peer]
	overflow atomic.Bool
}

func muxFrame(kind byte, id uint32, payload []byte) []byte {
	f := make([]byte, muxHeader, muxHeader+len(payload))
	f[0] = kind
	binary.BigEndian.PutUint32(f[1:], id)
	return append(f, payload...)
}

func (s *sfu) serveMux(w http.ResponseWriter, r *http.Request) {
	if !s.gatewayCall(w, r, http.MethodGet) {
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(s.cfg.maxFrame + muxSlack)
	ch := &channel{s: s, ws: ws, out: make(chan []byte, muxQueue), lost: make(chan struct{}), streams: map[uint32]*stream{}, acks: map[uint32]chan int{}}
	log.Printf("sfu channel from %s", r.RemoteAddr)
	go ch.writer()
	// the latest channel carries the reports; one that drops hands them back to HTTP
	s.channel.Store(ch)
	ch.readLoop()
	s.channel.CompareAndSwap(ch, nil)
	log.Printf("sfu channel from %s closed", r.RemoteAddr)
}

// send queues a frame for the gateway, waiting at most until deadline for room; false when the
// channel is gone or full.
func (ch *channel) send(f []byte, deadline time.Time) bool {
	select {
	case ch.out <- f:
		return true
	case <-ch.lost:
		return false
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case ch.out <- f:
		return true
	case <-ch.lost:
	case <-t.C:
	}
	return false
}

func (ch *channel) writer() {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case f := <-ch.out:
			_ = ch.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if ch.ws.WriteMessage(websocket.BinaryMessage, f) != nil {
				_ = ch.ws.Close()
				return
			}
		case <-ping.C:
			if ch.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)) != nil {
				_ = ch.ws.Close()
				return
			}
		case <-ch.lost:
			return
		}
	}
}

func (ch *channel) readLoop() {
	defer func() {
		close(ch.lost)
		_ = ch.ws.Close()
	}()
	_ = ch.ws.SetReadDeadline(time.Now().Add(pongTimeout))
	ch.ws.SetPongHandler(func(string) error { return ch.ws.SetReadDeadline(time.Now().Add(pongTimeout)) })
	for {
		kind, data, err := ch.ws.ReadMessage()
		if err != nil {
			return
		}
		// any frame shows the gateway is there, as a pong does
		_ = ch.ws.SetReadDeadline(time.Now().Add(pongTimeout))
		if kind != websocket.BinaryMessage || len(data) < muxHeader {
			log.Printf("sfu channel: a frame without its header")
			return
		}
		k, id, payload := data[0], binary.BigEndian.Uint32(data[1:muxHeader]), data[muxHeader:]
		if k == muxAck {
			ch.mu.Lock()
			ack := ch.acks[id]
			delete(ch.acks, id)
			ch.mu.Unlock()
			if ack != nil && len(payload) >= 2 {
				ack <- int(binary.BigEndian.Uint16(payload))
			}
			continue
		}
		if k == muxJoin {
			st := &stream{ch: ch, id: id, inbox: make(chan inbound, streamQueue), ended: make(chan struct{})}
			ch.mu.Lock()
			_, taken := ch.streams[id]
			if !taken {
				ch.streams[id] = st
			}
			ch.mu.Unlock()
			if !taken {
				go ch.join(st, payload)
			}
			continue
		}
		ch.mu.Lock()
		st := ch.streams[id]
		ch.mu.Unlock()
		if st == nil {
			continue // a stream the SFU closed: the gateway learns of it from the close frame
		}
		switch k {
		case muxText, muxBinary:
			select {
			case st.inbox <- inbound{k, payload}:
			default:
				st.full()
			}
		case muxEnd:
			st.end(len(payload) > 0 && payload[0] == 1)
		}
	}
}

// report sends one participant report and waits for the gateway's answer: an HTTP status, as
// the events route would have answered.
func (ch *channel) report(body []byte, sig string) (int, error) {
	id := ch.reports.Add(1)
	ack := make(chan int, 1)
	ch.mu.Lock()
	ch.acks[id] = ack
	ch.mu.Unlock()
	defer func() {
		ch.mu.Lock()
		delete(ch.acks, id)
		ch.mu.Unlock()
	}()
	deadline := time.Now().Add(eventTimeout)
	if !ch.send(muxFrame(muxEvent, id, append([]byte(sig), body...)), deadline) {
		return 0, errStreamLost
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case status := <-ack:
		return status, nil
	case <-ch.lost:
		return 0, errStreamLost
	case <-t.C:
		return 0, errors.New("the gateway did not answer the report")
	}
}

func (ch *channel) forget(id uint32) {
	ch.mu.Lock()
	delete(ch.streams, id)
	ch.mu.Unlock()
}

// join takes the stream's join as /signal takes a ticket, and answers accept or refuse.
func (ch *channel) join(st *stream, payload []byte) {
	var tk ticket
	var no *refusal
	if err := json.Unmarshal(payload, &tk); err != nil {
		no = &refusal{http.StatusBadRequest, "VALIDATION_FAILED", "the join does not decode"}
	} else if err := tk.check(); err != nil {
		no = &refusal{http.StatusBadRequest, "VALIDATION_FAILED", err.Error()}
	}
	var p *peer
	var ice []iceServer
	if no == nil {
		p, ice, no = ch.s.enter(&tk)
	}
	if no != nil {
		ch.forget(st.id)
		body, _ := json.Marshal(no)
		ch.send(muxFrame(muxRefuse, st.id, body), time.Now().Add(writeWait))
		return
	}
	st.peer.Store(p)
	p.outMu.Lock()
	p.sock = st
	p.outMu.Unlock()
	joined := ch.s.join(p, ice)
	// The accept carries the welcome the join queued, so the gateway completes the client's
	// upgrade and sends the welcome on one frame's arrival; it is queued before the writer
	// starts, so it comes before any other frame of the peer's.
	var welcome []byte
	if joined {
		select {
		case welcome = <-p.out:
		default:
		}
	}
	sent := ch.send(muxFrame(muxAccept, st.id, welcome), time.Now().Add(writeWait))
	p.markWelcomed()
	if !sent {
		ch.forget(st.id)
		p.close(reasonLeft, 0, "")
		return
	}
	go p.writer(st)
	if !joined {
		return // closed meanwhile: the writer closes the stream
	}
	p.logJoin()
	p.start()
	st.readLoop(p)
}

// readLoop hands the stream's frames to its peer until the gateway ends the stream, the channel
// drops or the peer is closed.
func (st *stream) readLoop(p *peer) {
	defer close(p.readDone)
	limit := bucket{tokens: rateBurst, last: time.Now()}
	for {
		select {
		case in := <-st.inbox:
			p.handle(&limit, in.kind == muxText, in.data)
		case <-st.ended:
			// what the client sent before it closed comes first, as on a socket
			for drained := false; !drained; {
				select {
				case in := <-st.inbox:
					p.handle(&limit, in.kind == muxText, in.data)
				default:
					drained = true
				}
			}
			reason := reasonLeft
			if st.failed.Load() {
				reason = reasonFailed
			}
			p.close(reason, 0, "")
			return
		case <-st.ch.lost:
			p.close(reasonLeft, 0, "")
			return
		case <-p.done:
			return
		}
	}
}

// full: the peer's frames come faster than it takes them, far past its rate.
func (st *stream) full() {
	if !st.overflow.CompareAndSwap(false, true) {
		return
	}
	if p := st.peer.Load(); p != nil {
		go p.fail("RATE_LIMITED", "too many signalling frames", websocket.ClosePolicyViolation)
	}
}

func (st *stream) end(failed bool) {
	st.endOnce.Do(func() {
		st.failed.Store(failed)
		st.ch.forget(st.id)
		close(st.ended)
	})
}

func (st *stream) write(data []byte, deadline time.Time) error {
	if !st.ch.send(muxFrame(muxText, st.id, data), deadline) {
		return errStreamLost
	}
	return nil
}

func (st *stream) keepalive() error { return nil }

func (st *stream) closeFrame(code int, text string, deadline time.Time) {
	if !st.closed.CompareAndSwap(false, true) {
		return
	}
	payload := binary.BigEndian.AppendUint16(nil, uint16(code))
	st.ch.send(muxFrame(muxClose, st.id, append(payload, text...)), deadline)
}

// forceClose drops the stream; a gateway not told otherwise closes its client's socket as one
// whose far end dropped (1006, which it sends as 1011).
func (st *stream) forceClose() {
	select {
	case <-st.ended:
		return // the gateway has let go of it already
	default:
	}
	st.closeFrame(1006, "", time.Now().Add(writeWait))
	st.ch.forget(st.id)
}

var errStreamLost = errors.New("the gateway's channel is gone or full")
