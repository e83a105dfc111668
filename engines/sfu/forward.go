package main

// Media forwarding. Each track a peer publishes arrives as a TrackRemote; the SFU reads its RTP and
// writes it to one TrackLocalStaticRTP, which every subscriber's connection carries on a sendonly
// transceiver of its own (pion rewrites SSRC and payload type per subscriber). The publisher is
// asked for keyframes so that subscribers can start and recover decoding.

import (
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
)

// publication is one incoming track and the local track that forwards it to subscribers.
type publication struct {
	src     *peer
	local   *webrtc.TrackLocalStaticRTP
	kind    webrtc.RTPCodecType
	ssrc    webrtc.SSRC
	lastPLI atomic.Int64 // unix ns of the last keyframe request sent to src
}

// forwardLocked adds pub to p's connection (the caller holds the room lock and renegotiates).
func (p *peer) forwardLocked(pub *publication) {
	fwd, err := p.attachLocked(pub.local)
	if err != nil {
		log.Printf("sfu forward %s's %s to %s: %v", pub.src.id, pub.kind, p.id, err)
		return
	}
	p.senders[pub.src.id] = append(p.senders[pub.src.id], fwd)
	go pub.readSubscriberRTCP(fwd.sender)
}

// forward is one forwarded track on a subscriber's connection.
type forward struct {
	sender      *webrtc.RTPSender
	transceiver *webrtc.RTPTransceiver
}

// retired is a forwarding transceiver whose track was removed, and the generation of the offers
// that may not include the removal yet.
type retired struct {
	transceiver *webrtc.RTPTransceiver
	gen         int64
}

// attachLocked puts a forwarded track on a transceiver of its own: a free one left by an earlier
// forward, else a new sendonly one. Not pion's AddTrack: it would pick the recvonly transceivers
// the client publishes on (they have no sender), turning them sendrecv under the client's track.
// Reusing free transceivers keeps the SDP from growing an m-line per track with every join.
func (p *peer) attachLocked(local *webrtc.TrackLocalStaticRTP) (forward, error) {
	if t := p.takeFree(local.Kind()); t != nil {
		sender, err := p.s.api.NewRTPSender(local, p.pc.SCTP().Transport())
		if err == nil {
			if err = t.SetSender(sender, local); err == nil {
				return forward{sender, t}, nil
			}
			_ = sender.Stop()
		}
		log.Printf("sfu reuse of a transceiver for %s: %v", p.id, err)
	}
	t, err := p.pc.AddTransceiverFromTrack(local, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
	if err != nil {
		return forward{}, err
	}
	return forward{t.Sender(), t}, nil
}

// detachLocked removes a forwarded track; its transceiver (now inactive) is free for another once
// the client has answered an offer that includes the removal. Reused earlier, the m-line would go
// from one track to another without an inactive turn between, and the client would not see the
// new track (a browser fires ontrack when an m-line starts receiving).
func (p *peer) detachLocked(fwd forward) {
	if err := p.pc.RemoveTrack(fwd.sender); err != nil {
		log.Printf("sfu remove a forwarded track from %s: %v", p.id, err)
		return
	}
	p.poolMu.Lock()
	p.retiring = append(p.retiring, retired{fwd.transceiver, p.offerGen.Load()})
	p.poolMu.Unlock()
}

// takeFree returns a free forwarding transceiver of the kind, or nil.
func (p *peer) takeFree(kind webrtc.RTPCodecType) *webrtc.RTPTransceiver {
	p.poolMu.Lock()
	defer p.poolMu.Unlock()
	for i, t := range p.free {
		if t.Kind() == kind {
			p.free = append(p.free[:i], p.free[i+1:]...)
			return t
		}
	}
	return nil
}

// answered frees the transceivers whose removal was in the answered offer (generation gen).
func (p *peer) answered(gen int64) {
	p.poolMu.Lock()
	defer p.poolMu.Unlock()
	kept := p.retiring[:0]
	for _, r := range p.retiring {
		if r.gen < gen {
			p.free = append(p.free, r.transceiver)
		} else {
			kept = append(kept, r)
		}
	}
	p.retiring = kept
}

// publish forwards one incoming track of p to every other peer of the room, and pumps its packets
// until the track ends. A muted peer's packets are read and dropped: its tracks stay negotiated,
// so unmuting needs no renegotiation.
func (s *sfu) publish(p *peer, remote *webrtc.TrackRemote) {
	id := remote.ID()
	if id == "" {
		id = fmt.Sprintf("%s-%d", remote.Kind(), remote.SSRC())
	}
	// The stream id is the publisher's peer id: that is how a client tells whose track it got.
	local, err := webrtc.NewTrackLocalStaticRTP(remote.Codec().RTPCodecCapability, id, p.id)
	if err != nil {
		log.Printf("sfu track of %s: %v", p.id, err)
		return
	}
	pub := &publication{src: p, local: local, kind: remote.Kind(), ssrc: remote.SSRC()}
	r := p.room.Load()
	if r == nil {
		return // cannot happen: tracks arrive after the first offer, made once p is admitted
	}
	r.mu.Lock()
	if r.peers[p.id] != p {
		r.mu.Unlock()
		return
	}
	p.published = append(p.published, pub)
	var subscribers []*peer
	for _, o := range r.peers {
		if o != p {
			o.forwardLocked(pub)
			subscribers = append(subscribers, o)
		}
	}
	r.mu.Unlock()
	log.Printf("sfu track ns=%q room=%q peer=%q kind=%s codec=%s forwarded_to=%d", p.key.ns, p.key.name, p.id,
		pub.kind, remote.Codec().MimeType, len(subscribers))
	for _, o := range subscribers {
		o.negotiate()
	}
	if pub.kind == webrtc.RTPCodecTypeVideo {
		go pub.keyframeLoop(p.done)
	}
	buf := make([]byte, 1500)
	for {
		n, _, err := remote.Read(buf)
		if err != nil {
			return
		}
		p.rtpIn.Add(1)
		if p.muted.Load() {
			p.rtpDropped.Add(1)
			continue
		}
		// Write fails only for a subscriber whose connection is closing; the others still get it.
		_, _ = local.Write(buf[:n])
	}
}

// keyframeLoop asks the publisher for a keyframe every 3 s: a subscriber that joins, or that lost
// packets, can only start decoding video at a keyframe, and browsers send one on request.
func (pub *publication) keyframeLoop(done <-chan struct{}) {
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			pub.requestKeyframe(0)
		}
	}
}

// requestKeyframe sends the publisher a PLI, at most one per minGap.
func (pub *publication) requestKeyframe(minGap time.Duration) {
	if pub.kind != webrtc.RTPCodecTypeVideo {
		return
	}
	now := time.Now().UnixNano()
	last := pub.lastPLI.Load()
	if minGap > 0 && now-last < int64(minGap) {
		return
	}
	pub.lastPLI.Store(now)
	_ = pub.src.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(pub.ssrc)}})
}

// readSubscriberRTCP reads what a subscriber sends back on a forwarded track: reading is what lets
// the interceptors answer its NACKs, and its keyframe requests are passed on to the publisher
// (throttled: many subscribers asking at once need one keyframe). It ends when the sender does.
func (pub *publication) readSubscriberRTCP(sender *webrtc.RTPSender) {
	for {
		pkts, _, err := sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, pkt := range pkts {
			switch pkt.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				pub.requestKeyframe(500 * time.Millisecond)
			}
		}
	}
}

// keyframes asks for a keyframe on each of p's video tracks (after an unmute: the subscribers'
// decoders have had nothing from it for a while).
func (p *peer) keyframes() {
	r := p.room.Load()
	if r == nil {
		return
	}
	r.mu.Lock()
	pubs := append([]*publication(nil), p.published...)
	r.mu.Unlock()
	for _, pub := range pubs {
		pub.requestKeyframe(0)
	}
}
