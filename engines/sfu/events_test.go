package main

// Participant reports (events.go): a join is reported once its welcome has left, and a leave
// still follows its join.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestAJoinIsReportedOnceItsWelcomeLeft(t *testing.T) {
	var mu sync.Mutex
	var got []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got = append(got, ev.Event)
		mu.Unlock()
	}))
	defer server.Close()
	e := newEvents(server.URL, "n1", func() *channel { return nil })
	p := &peer{id: "p1", user: "0xabc", key: roomKey{"calls", "standup"}, eventKey: make([]byte, 32),
		done: make(chan struct{}), welcomed: make(chan struct{})}
	reports := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}

	e.post(p, "join", "")
	e.post(p, "leave", reasonLeft)
	time.Sleep(150 * time.Millisecond)
	if r := reports(); len(r) != 0 {
		t.Fatalf("reported before the welcome left: %v", r)
	}
	p.markWelcomed()
	waitFor(t, func() bool { return len(reports()) == 2 }, "both reports")
	if r := reports(); r[0] != "join" || r[1] != "leave" {
		t.Fatalf("the leave went before its join: %v", r)
	}

	// a peer closed before its welcome could leave is reported all the same
	q := &peer{id: "p2", user: "0xabc", key: roomKey{"calls", "standup"}, eventKey: make([]byte, 32),
		done: make(chan struct{}), welcomed: make(chan struct{})}
	e.post(q, "join", "")
	close(q.done)
	waitFor(t, func() bool { return len(reports()) == 3 }, "the closed peer's join")
}
