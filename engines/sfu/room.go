package main

// Rooms. A room is every peer admitted with the same (namespace, room) pair, so two namespaces
// that both name a room "lobby" never meet. Each track a peer publishes is forwarded to every other
// peer of its room, including those who join later, and each message on a peer's "room" data
// channel is relayed to the others' channels.

import (
	"errors"
	"sort"
	"sync"

	"github.com/pion/webrtc/v4"
)

type roomKey struct{ ns, name string }

type room struct {
	key roomKey
	// mu guards peers and, for each member, joined, published and senders. Track changes hold it
	// while they add and remove forwarded tracks (local work, no network): a track published while
	// a peer leaves is then either forwarded before the leave removes it, or never forwarded.
	// Frames sent under it are only queued (peer.send never blocks).
	mu    sync.Mutex
	peers map[string]*peer
}

// registry is the node's rooms. Lock order: registry.mu, then room.mu.
type registry struct {
	mu       sync.Mutex
	rooms    map[roomKey]*room
	maxRooms int
	maxPeers int
	closing  bool // set at shutdown: no more admissions
}

var (
	errConflict  = errors.New("this peer id is already in the room")
	errRoomFull  = errors.New("the room is full")
	errRoomsFull = errors.New("this node has no room for another room")
	errClosing   = errors.New("the SFU is shutting down")
)

// admit reserves p's place in its room before the socket is upgraded, so that the conflict and
// capacity answers are plain HTTP and two sockets with one peer id cannot both get in. The tracks
// already published in the room are added to p's connection here; they are in its first offer.
func (g *registry) admit(p *peer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return errClosing
	}
	r := g.rooms[p.key]
	if r == nil {
		if len(g.rooms) >= g.maxRooms {
			return errRoomsFull
		}
		r = &room{key: p.key, peers: map[string]*peer{}}
		g.rooms[p.key] = r
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.peers[p.id]; taken {
		return errConflict
	}
	if len(r.peers) >= g.maxPeers {
		return errRoomFull
	}
	for _, o := range r.peers {
		for _, pub := range o.published {
			p.forwardLocked(pub)
		}
	}
	r.peers[p.id] = p
	p.room.Store(r)
	return nil
}

// join makes p a participant the others are told about: its welcome (listing those already
// joined), its join report, and participant-joined to the others. It runs under the room lock,
// as remove does, so every participant hears of every other exactly once and a leave is never
// announced or reported before its join. False when p was closed before it could join.
func (s *sfu) join(p *peer, ice []iceServer) bool {
	r := p.room.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.closed.Load() {
		return false
	}
	present := []participantRef{}
	others := []*peer{}
	for _, o := range r.peers {
		if o != p && o.joined {
			others = append(others, o)
		}
	}
	sort.Slice(others, func(i, j int) bool { return others[i].joinedAt.Before(others[j].joinedAt) })
	for _, o := range others {
		present = append(present, participantRef{PeerID: o.id, User: o.user})
	}
	p.send(welcomeFrame{Type: "welcome", PeerID: p.id, Room: p.key.name, Participants: present, ICEServers: ice})
	p.joined = true
	s.events.post(p, "join", "")
	for _, o := range others {
		o.send(participantFrame{Type: "participant-joined", PeerID: p.id, User: p.user})
	}
	return true
}

// remove takes p out of its room: its forwarded tracks are removed from the others' connections
// (those others are returned, to renegotiate), and if it had joined they are told it left. An
// empty room is dropped, so its name no longer counts against SFU_MAX_ROOMS.
func (g *registry) remove(p *peer) (renegotiate []*peer, wasJoined bool) {
	r := p.room.Load()
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	if r.peers[p.id] != p {
		r.mu.Unlock()
		return nil, false
	}
	delete(r.peers, p.id)
	wasJoined = p.joined
	for _, o := range r.peers {
		if fwds := o.senders[p.id]; len(fwds) > 0 {
			for _, fwd := range fwds {
				o.detachLocked(fwd)
			}
			delete(o.senders, p.id)
			renegotiate = append(renegotiate, o)
		}
		if wasJoined && o.joined {
			o.send(participantFrame{Type: "participant-left", PeerID: p.id, User: p.user})
		}
	}
	empty := len(r.peers) == 0
	r.mu.Unlock()
	if empty {
		g.mu.Lock()
		r.mu.Lock()
		if len(r.peers) == 0 && g.rooms[r.key] == r {
			delete(g.rooms, r.key)
		}
		r.mu.Unlock()
		g.mu.Unlock()
	}
	return renegotiate, wasJoined
}

// relay passes one data-channel message to every other peer's "room" channel. A peer whose
// channel is not open yet, or has fallen more than maxBuffered bytes behind, misses it rather
// than making the process hold an unbounded backlog for it.
func (r *room) relay(from *peer, msg webrtc.DataChannelMessage) {
	const maxBuffered = 1 << 20
	r.mu.Lock()
	targets := make([]*webrtc.DataChannel, 0, len(r.peers))
	for _, o := range r.peers {
		if o != from {
			targets = append(targets, o.dc)
		}
	}
	r.mu.Unlock()
	for _, dc := range targets {
		if dc.ReadyState() != webrtc.DataChannelStateOpen || dc.BufferedAmount() > maxBuffered {
			continue
		}
		if msg.IsString {
			_ = dc.SendText(string(msg.Data))
		} else {
			_ = dc.Send(msg.Data)
		}
	}
}

// stats counts rooms and peers for /health.
func (g *registry) stats() (rooms, peers int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.rooms {
		r.mu.Lock()
		peers += len(r.peers)
		r.mu.Unlock()
	}
	return len(g.rooms), peers
}

type participantInfo struct {
	PeerID   string `json:"peer_id"`
	User     string `json:"user"`
	Device   string `json:"device"`
	Muted    bool   `json:"muted"`
	JoinedAt int64  `json:"joined_at"`
}

type roomInfo struct {
	Room         string            `json:"room"`
	Participants []participantInfo `json:"participants"`
}

// list describes namespace ns's rooms, sorted by name, participants in the order they joined.
func (g *registry) list(ns string) []roomInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []roomInfo{}
	for key, r := range g.rooms {
		if key.ns != ns {
			continue
		}
		info := roomInfo{Room: key.name, Participants: []participantInfo{}}
		r.mu.Lock()
		for _, p := range r.peers {
			info.Participants = append(info.Participants, participantInfo{PeerID: p.id, User: p.user,
				Device: p.device, Muted: p.muted.Load(), JoinedAt: p.joinedAt.UnixMilli()})
		}
		r.mu.Unlock()
		sort.Slice(info.Participants, func(i, j int) bool {
			a, b := info.Participants[i], info.Participants[j]
			return a.JoinedAt < b.JoinedAt || (a.JoinedAt == b.JoinedAt && a.PeerID < b.PeerID)
		})
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Room < out[j].Room })
	return out
}

// match finds the peers of one room whose user is user or whose id is peerID (an empty one
// matches nothing).
func (g *registry) match(key roomKey, user, peerID string) []*peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.rooms[key]
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*peer
	for _, p := range r.peers {
		if (user != "" && p.user == user) || (peerID != "" && p.id == peerID) {
			out = append(out, p)
		}
	}
	return out
}

// ofNamespace returns every peer of namespace ns, in every room: media turned off, or the
// namespace deleted, ends its calls.
func (g *registry) ofNamespace(ns string) []*peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*peer
	for key, r := range g.rooms {
		if key.ns != ns {
			continue
		}
		r.mu.Lock()
		for _, p := range r.peers {
			out = append(out, p)
		}
		r.mu.Unlock()
	}
	return out
}

// closeAll stops admissions and returns every peer, for shutdown.
func (g *registry) closeAll() []*peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closing = true
	var out []*peer
	for _, r := range g.rooms {
		r.mu.Lock()
		for _, p := range r.peers {
			out = append(out, p)
		}
		r.mu.Unlock()
	}
	return out
}
