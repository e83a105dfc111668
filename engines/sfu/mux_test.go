package main

// The gateway's channel (mux.go) against a real SFU on a test server: a join accepted with its
// welcome, a room's cap refused as /signal refuses it, a peer flooding its stream closed with 1008
// while the channel goes on, and the channel's loss taking its peers out of their rooms.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func testSFU(t *testing.T, maxPeers int) (*sfu, *httptest.Server) {
	t.Helper()
	cfg := &config{listen: "127.0.0.1:0", key: bytes.Repeat([]byte{7}, 32), node: "n1", maxPeers: maxPeers, maxRooms: 10,
		maxFrame: 1 << 20, maxData: 16384}
	s, err := newSFU(cfg)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(s.handler())
	t.Cleanup(server.Close)
	return s, server
}

func dialMux(t *testing.T, server *httptest.Server, key []byte) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	header := http.Header{"Authorization": {"Bearer " + hex.EncodeToString(key)}}
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(server.URL, "http")+"/mux", header)
}

func sendFrame(t *testing.T, ws *websocket.Conn, kind byte, id uint32, payload []byte) {
	t.Helper()
	if err := ws.WriteMessage(websocket.BinaryMessage, muxFrame(kind, id, payload)); err != nil {
		t.Fatal(err)
	}
}

// next reads channel frames until one of kind for stream id (reports are acked as they come).
func next(t *testing.T, ws *websocket.Conn, kind byte, id uint32) []byte {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %c of %d: %v", kind, id, err)
		}
		k, got := data[0], binary.BigEndian.Uint32(data[1:muxHeader])
		if k == muxEvent {
			sendFrame(t, ws, muxAck, got, binary.BigEndian.AppendUint16(nil, 200))
			continue
		}
		if k == kind && got == id {
			return data[muxHeader:]
		}
	}
}

func joinPayload(peer string) []byte {
	body, _ := json.Marshal(ticket{NS: "calls", Room: "standup", User: "0xabc", Peer: peer, EK: strings.Repeat("ab", 32)})
	return body
}

func TestMuxRefusesAWrongKey(t *testing.T) {
	_, server := testSFU(t, 2)
	if _, resp, err := dialMux(t, server, bytes.Repeat([]byte{1}, 32)); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %v %v", resp, err)
	}
}

func TestMuxJoinsAndRefuses(t *testing.T) {
	s, server := testSFU(t, 1)
	ws, _, err := dialMux(t, server, s.cfg.key)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	sendFrame(t, ws, muxJoin, 1, joinPayload("p1"))
	var welcome welcomeFrame
	if err := json.Unmarshal(next(t, ws, muxAccept, 1), &welcome); err != nil || welcome.Type != "welcome" || welcome.PeerID != "p1" {
		t.Fatalf("the accept carries the welcome: %+v %v", welcome, err)
	}
	var offer sdpFrame
	if err := json.Unmarshal(next(t, ws, muxText, 1), &offer); err != nil || offer.Type != "offer" {
		t.Fatalf("then the offer: %+v %v", offer, err)
	}
	// the room holds one
	sendFrame(t, ws, muxJoin, 2, joinPayload("p2"))
	var no refusal
	if err := json.Unmarshal(next(t, ws, muxRefuse, 2), &no); err != nil || no.Status != 503 || no.Code != "ROOM_FULL" {
		t.Fatalf("a full room: %+v %v", no, err)
	}
	sendFrame(t, ws, muxJoin, 3, []byte(`{"ns":"calls"}`))
	if err := json.Unmarshal(next(t, ws, muxRefuse, 3), &no); err != nil || no.Status != 400 {
		t.Fatalf("an incomplete join: %+v %v", no, err)
	}
	// the client leaves: the peer is out of its room
	sendFrame(t, ws, muxEnd, 1, []byte{0})
	waitFor(t, func() bool { _, peers := s.rooms.stats(); return peers == 0 }, "the peer gone")
}

func TestMuxClosesAFloodingPeerAndKeepsTheChannel(t *testing.T) {
	s, server := testSFU(t, 4)
	ws, _, err := dialMux(t, server, s.cfg.key)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	sendFrame(t, ws, muxJoin, 1, joinPayload("p1"))
	next(t, ws, muxAccept, 1)
	for i := 0; i < rateBurst+10; i++ {
		sendFrame(t, ws, muxText, 1, []byte(`{"type":"candidate","candidate":{"candidate":""}}`))
	}
	closed := next(t, ws, muxClose, 1)
	if code := binary.BigEndian.Uint16(closed); code != websocket.ClosePolicyViolation {
		t.Fatalf("closed with %d, not 1008", code)
	}
	sendFrame(t, ws, muxJoin, 2, joinPayload("p2"))
	next(t, ws, muxAccept, 2)
}

func TestMuxLossTakesItsPeersOut(t *testing.T) {
	s, server := testSFU(t, 4)
	ws, _, err := dialMux(t, server, s.cfg.key)
	if err != nil {
		t.Fatal(err)
	}
	for id, peer := range []string{"p1", "p2"} {
		sendFrame(t, ws, muxJoin, uint32(id+1), joinPayload(peer))
		next(t, ws, muxAccept, uint32(id+1))
	}
	if _, peers := s.rooms.stats(); peers != 2 {
		t.Fatalf("%d peers, not 2", peers)
	}
	_ = ws.Close()
	waitFor(t, func() bool { _, peers := s.rooms.stats(); return peers == 0 }, "the channel's peers gone")
	if s.channel.Load() != nil {
		t.Fatal("reports still go to a lost channel")
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out: %s", what)
		}
	}
}
