package main

// A peer is one participant: its peer connection to the SFU, its signalling socket and its place
// in a room. The SFU is always the offerer and the client only answers, so the two sides never
// offer at once (no glare), and one peer has at most one offer outstanding: a change that needs
// renegotiation while an offer is out is remembered and offered once the answer is in.

import (
	"encoding/json"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/webrtc/v4"
)

// Leave reasons, as reported in leave events.
const (
	reasonLeft   = "left"   // the client said leave, or its socket closed, or the node shut down
	reasonKicked = "kicked" // POST /control kick
	reasonFailed = "failed" // the connection failed, the socket went silent, or the client broke the protocol
)

// sendQueue bounds the frames waiting for a slow client; a client that far behind is closed.
const sendQueue = 512

type peer struct {
	s        *sfu
	id       string
	user     string
	device   string
	key      roomKey
	eventKey []byte
	joinedAt time.Time
	pc       *webrtc.PeerConnection
	dc       *webrtc.DataChannel // the "room" channel the SFU made
	room     atomic.Pointer[room]

	// Guarded by the room's mu.
	joined    bool
	published []*publication
	senders   map[string][]forward // forwarded tracks on this connection, by source peer id

	// Forwarding transceivers whose track was removed (forward.go, attachLocked).
	poolMu   sync.Mutex
	retiring []retired
	free     []*webrtc.RTPTransceiver
	offerGen atomic.Int64 // counts offers; the one outstanding is the latest

	muted      atomic.Bool
	closed     atomic.Bool
	done       chan struct{} // closed when the peer is
	welcomed   chan struct{} // closed once its welcome left (or it never will): its join report waits for it
	welcomeOne sync.Once
	readDone   chan struct{} // closed when the socket's reader has ended
	rtpIn      atomic.Uint64 // RTP packets received from this peer
	rtpDropped atomic.Uint64 // of those, dropped while it was muted

	// Outbound frames go through a queue that one writer goroutine drains (signal.go), so frames
	// can be sent under locks without a slow client stalling anyone.
	outMu     sync.Mutex
	out       chan []byte
	sock      signalSocket
	offerSent bool     // the first offer is queued; until then local candidates are held,
	held      [][]byte // since a client cannot add a candidate before it has the offer
	closeCode int      // the close frame the writer ends with (0: none)
	closeText string

	negMu     sync.Mutex
	offering  bool // an offer is outstanding (or, before start, negotiation has not begun)
	pending   bool // something changed since that offer: offer again when the answer comes
	remoteSet bool // an answer has been applied; remote candidates before that are held
	remoteIn  []webrtc.ICECandidateInit

	evMu      sync.Mutex
	lastEvent chan struct{} // done when this peer's previous report is; keeps join before leave
}

// newPeer makes the peer connection for a ticket: recvonly audio and video transceivers (the
// client sends on them), the "room" data channel, and the handlers. Negotiation waits for start.
func (s *sfu) newPeer(tk *ticket) (*peer, []iceServer, error) {
	conf, ice := s.cfg.iceFor(tk.NS, time.Now())
	pc, err := s.api.NewPeerConnection(conf)
	if err != nil {
		return nil, nil, err
	}
	p := &peer{
		s: s, id: tk.Peer, user: tk.User, device: tk.Device, key: roomKey{tk.NS, tk.Room},
		eventKey: tk.eventKey, joinedAt: time.Now(), pc: pc,
		senders: map[string][]forward{}, done: make(chan struct{}), welcomed: make(chan struct{}), readDone: make(chan struct{}), out: make(chan []byte, sendQueue),
		offering: true,
	}
	p.muted.Store(tk.Muted)
	for _, kind := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeAudio, webrtc.RTPCodecTypeVideo} {
		if _, err := pc.AddTransceiverFromKind(kind, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			_ = pc.Close()
			return nil, nil, err
		}
	}
	ordered := true
	if p.dc, err = pc.CreateDataChannel("room", &webrtc.DataChannelInit{Ordered: &ordered}); err != nil {
		_ = pc.Close()
		return nil, nil, err
	}
	p.dc.OnMessage(func(msg webrtc.DataChannelMessage) {
		if len(msg.Data) > s.cfg.maxData {
			return
		}
		if r := p.room.Load(); r != nil {
			r.relay(p, msg)
		}
	})
	pc.OnICECandidate(func(c *webrtc.ICECandidate) {
		if c != nil {
			p.sendCandidate(c.ToJSON())
		}
	})
	pc.OnConnectionStateChange(func(state webrtc.PeerConnectionState) {
		if state == webrtc.PeerConnectionStateConnected || state == webrtc.PeerConnectionStateFailed {
			log.Printf("sfu peer ns=%q room=%q peer=%q connection=%s", p.key.ns, p.key.name, p.id, state)
		}
		if state == webrtc.PeerConnectionStateFailed || state == webrtc.PeerConnectionStateClosed {
			p.close(reasonFailed, 1011, "peer connection "+state.String())
		}
	})
	pc.OnTrack(func(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { s.publish(p, remote) })
	return p, ice, nil
}

// send queues one frame. It never blocks: a client whose queue is full is closed instead.
// markWelcomed says the welcome was written (or will not be): the join report may go.
func (p *peer) markWelcomed() { p.welcomeOne.Do(func() { close(p.welcomed) }) }

func (p *peer) send(frame any) {
	data, err := json.Marshal(frame)
	if err != nil {
		log.Printf("sfu frame for %s: %v", p.id, err)
		return
	}
	p.outMu.Lock()
	defer p.outMu.Unlock()
	p.enqueueLocked(data)
}

func (p *peer) enqueueLocked(data []byte) {
	if p.closed.Load() {
		return
	}
	select {
	case p.out <- data:
	default:
		go p.close(reasonFailed, 1008, "client too slow")
	}
}

func (p *peer) sendCandidate(c webrtc.ICECandidateInit) {
	data, err := json.Marshal(candidateFrame{Type: "candidate",
		Candidate: candidateJSON{Candidate: c.Candidate, SDPMid: c.SDPMid, SDPMLineIndex: c.SDPMLineIndex}})
	if err != nil {
		return
	}
	p.outMu.Lock()
	defer p.outMu.Unlock()
	if !p.offerSent {
		p.held = append(p.held, data)
		return
	}
	p.enqueueLocked(data)
}

// sendOffer queues an offer, then any candidates gathered before it.
func (p *peer) sendOffer(sdp string) {
	data, err := json.Marshal(sdpFrame{Type: "offer", SDP: sdp})
	if err != nil {
		return
	}
	p.outMu.Lock()
	defer p.outMu.Unlock()
	p.enqueueLocked(data)
	p.offerSent = true
	for _, c := range p.held {
		p.enqueueLocked(c)
	}
	p.held = nil
}

// start sends the first offer: everything added so far (the recvonly transceivers, the data
// channel, the room's tracks) is in it.
func (p *peer) start() {
	p.negMu.Lock()
	defer p.negMu.Unlock()
	p.offerLocked()
}

// negotiate asks for a new offer, now if none is outstanding, else after the answer.
func (p *peer) negotiate() {
	p.negMu.Lock()
	defer p.negMu.Unlock()
	if p.offering {
		p.pending = true
		return
	}
	p.offerLocked()
}

func (p *peer) offerLocked() {
	p.pending = false
	if p.closed.Load() {
		return
	}
	// Counted before the offer is made: a removal recorded under this generation may be in it
	// or not, one under an earlier generation is.
	p.offerGen.Add(1)
	offer, err := p.pc.CreateOffer(nil)
	if err == nil {
		err = p.pc.SetLocalDescription(offer)
	}
	if err != nil {
		p.offering = false
		if !p.closed.Load() {
			log.Printf("sfu offer to %s: %v", p.id, err)
			go p.close(reasonFailed, 1011, "negotiation failed")
		}
		return
	}
	p.offering = true
	p.sendOffer(offer.SDP)
}

// answer applies the client's answer to the outstanding offer, then offers again if anything
// changed meanwhile.
func (p *peer) answer(sdp string) error {
	p.negMu.Lock()
	defer p.negMu.Unlock()
	if !p.offering || !p.offerSent {
		return errNoOffer
	}
	if err := p.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp}); err != nil {
		// The offer is still outstanding: a corrected answer may follow.
		return err
	}
	p.answered(p.offerGen.Load())
	if !p.remoteSet {
		p.remoteSet = true
		for _, c := range p.remoteIn {
			if err := p.pc.AddICECandidate(c); err != nil {
				log.Printf("sfu candidate from %s: %v", p.id, err)
			}
		}
		p.remoteIn = nil
	}
	p.offering = false
	if p.pending {
		p.offerLocked()
	}
	return nil
}

// candidate adds a client's ICE candidate; one that arrives before the answer (a client may send
// its candidates before its answer) is held until the answer is applied.
func (p *peer) candidate(c webrtc.ICECandidateInit) error {
	p.negMu.Lock()
	defer p.negMu.Unlock()
	if !p.remoteSet {
		if len(p.remoteIn) < 64 {
			p.remoteIn = append(p.remoteIn, c)
		}
		return nil
	}
	return p.pc.AddICECandidate(c)
}

// setMuted mutes or unmutes the peer's media for the others and tells the peer.
func (p *peer) setMuted(muted bool) {
	p.muted.Store(muted)
	p.send(mutedFrame{Type: "muted", Muted: muted})
	if !muted {
		p.keyframes()
	}
}

// close ends the peer once, whichever of its socket, its connection, a kick or shutdown gets there
// first: out of the room (the others lose its tracks and hear it left), the leave reported (before
// anything that can take time, so that at shutdown the report is on its way), the socket closed
// with code (after the frames already queued), the connection closed.
func (p *peer) close(reason string, code int, text string) {
	if !p.closed.CompareAndSwap(false, true) {
		return
	}
	renegotiate, wasJoined := p.s.rooms.remove(p)
	if wasJoined {
		p.s.events.post(p, "leave", reason)
		log.Printf("sfu leave ns=%q room=%q peer=%q user=%q reason=%s rtp_in=%d rtp_dropped_muted=%d", p.key.ns,
			p.key.name, p.id, p.user, reason, p.rtpIn.Load(), p.rtpDropped.Load())
	}
	p.outMu.Lock()
	p.closeCode, p.closeText = code, text
	sock := p.sock
	p.outMu.Unlock()
	close(p.done)
	if sock != nil {
		// The writer flushes and closes; this bounds a writer stuck on a client that stopped reading.
		time.AfterFunc(2*time.Second, sock.forceClose)
	}
	for _, o := range renegotiate {
		o.negotiate()
	}
	_ = p.pc.Close()
}
