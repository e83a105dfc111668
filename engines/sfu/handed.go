package main

// Handed sockets: the gateway that runs this media server passes a client's signalling socket
// itself, over node's IPC channel (NODE_CHANNEL_FD), once it has decided the join. The media
// server then answers the client's WebSocket handshake and owns the socket as if the client had
// come to /signal with a ticket, so a local join costs the gateway no WebSocket of its own and no
// relaying of frames (docs/webrtc.md, "Signalling").
//
// The channel speaks node's own protocol (serialization "json"): one JSON object a line; a line
// whose cmd is NODE_HANDLE carries one file descriptor (SCM_RIGHTS) and the gateway's message in
// "msg", and is acknowledged with NODE_HANDLE_ACK before node sends the next. The gateway sends
// its sockets detached from its server, so node asks nothing more about them. Every line this
// server writes back, but the acknowledgement, is a plain message: each handed join's outcome.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// handOrder is the gateway's message with a handed socket: the join (a ticket's fields, without
// its expiry) and what the client's handshake needs answered.
type handOrder struct {
	Join     ticket `json:"join"`
	Key      string `json:"key"`
	Protocol string `json:"protocol"`
}

type ipcLine struct {
	Cmd string          `json:"cmd"`
	Msg json.RawMessage `json:"msg"`
}

type ipcChannel struct {
	fd int
	mu sync.Mutex
}

// say writes lines to the gateway, in one write.
func (c *ipcChannel) say(vs ...any) {
	var line []byte
	for _, v := range vs {
		one, err := json.Marshal(v)
		if err != nil {
			return
		}
		line = append(append(line, one...), '\n')
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(line) > 0 {
		n, err := syscall.Write(c.fd, line)
		if err == syscall.EINTR || err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			return
		}
		line = line[n:]
	}
}

// serveHanded reads the gateway's channel until it closes.
func (s *sfu) serveHanded(fd int) {
	// node makes its end non-blocking; this reader blocks in its own goroutine
	_ = syscall.SetNonblock(fd, false)
	c := &ipcChannel{fd: fd}
	buf := make([]byte, 64*1024)
	oob := make([]byte, syscall.CmsgSpace(4*64))
	var pending []byte
	var fds []int
	for {
		n, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			for _, f := range fds {
				_ = syscall.Close(f)
			}
			return
		}
		if oobn > 0 {
			if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for i := range msgs {
					if got, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
						fds = append(fds, got...)
					}
				}
			}
		}
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			var line ipcLine
			bad := json.Unmarshal(pending[:i], &line) != nil
			pending = pending[i+1:]
			switch {
			case bad:
			case line.Cmd == "NODE_HANDLE":
				if len(fds) == 0 {
					c.say(handleAck)
					log.Printf("sfu handed join without a socket")
					continue
				}
				f := fds[0]
				fds = fds[1:]
				ack := &handAck{c: c}
				// node sends the next socket only once this one is acknowledged: a join that
				// takes long to answer holds the others back no longer than this
				time.AfterFunc(ackWithin, func() { ack.say() })
				go s.takeHanded(ack, f, line.Msg)
			}
		}
		if len(pending) > 1<<20 {
			log.Printf("sfu: the gateway's channel sent a line over 1 MiB; closing it")
			return
		}
	}
}

// handedOutcome tells the gateway how a handed join's handshake was answered (101, or the
// refusal's status) and, later, that an accepted peer's socket has ended.
type handedOutcome struct {
	Peer   string `json:"peer"`
	Status int    `json:"status,omitempty"`
	Ended  bool   `json:"ended,omitempty"`
}

// handleAck acknowledges a NODE_HANDLE line. node sends no other line until it has it, and the
// acknowledgement wakes the gateway: it goes with the join's outcome, once the client has its
// answer (and, for a peer, its welcome), so the gateway's turn does not come between them on a
// shared CPU.
var handleAck = map[string]string{"cmd": "NODE_HANDLE_ACK"}

// ackWithin bounds how long a handed socket goes unacknowledged while its join is answered
// (usually well under a millisecond).
const ackWithin = 2 * time.Millisecond

// handAck is one handed socket's acknowledgement, sent once: with the join's outcome, or alone
// when ackWithin passes first (the outcome then follows on its own).
type handAck struct {
	c    *ipcChannel
	once sync.Once
}

// say writes lines to the gateway, the acknowledgement first if it has not been sent.
func (a *handAck) say(lines ...any) {
	first := false
	a.once.Do(func() {
		first = true
		a.c.say(append([]any{handleAck}, lines...)...)
	})
	if !first && len(lines) > 0 {
		a.c.say(lines...)
	}
}

// takeHanded answers one handed socket's handshake: the join refused (the API's envelope, as the
// gateway answers a refused join) or the peer in its room, its socket this server's own. Its
// lines to the gateway go through the socket's acknowledgement, c.
func (s *sfu) takeHanded(c *handAck, fd int, msg json.RawMessage) {
	file := os.NewFile(uintptr(fd), "handed")
	conn, err := net.FileConn(file)
	_ = file.Close()
	if err != nil {
		c.say()
		log.Printf("sfu handed socket: %v", err)
		return
	}
	var order handOrder
	var no *refusal
	if err := json.Unmarshal(msg, &order); err != nil {
		no = &refusal{http.StatusBadRequest, "VALIDATION_FAILED", "the join does not decode"}
	} else if err := order.Join.check(); err != nil {
		no = &refusal{http.StatusBadRequest, "VALIDATION_FAILED", err.Error()}
	} else if order.Key == "" {
		no = &refusal{http.StatusBadRequest, "VALIDATION_FAILED", "the handshake has no key"}
	}
	var p *peer
	var ice []iceServer
	if no == nil {
		p, ice, no = s.enter(&order.Join)
	}
	if no != nil {
		c.say(handedOutcome{Peer: order.Join.Peer, Status: answerRefused(conn, no)})
		return
	}
	req := &http.Request{Method: http.MethodGet, Header: http.Header{}, ProtoMajor: 1, ProtoMinor: 1, RemoteAddr: conn.RemoteAddr().String()}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-Websocket-Version", "13")
	req.Header.Set("Sec-Websocket-Key", order.Key)
	var answer http.Header
	if order.Protocol != "" {
		answer = http.Header{"Sec-Websocket-Protocol": {order.Protocol}}
	}
	ws, err := upgrader.Upgrade(&handedWriter{conn: conn, header: http.Header{}}, req, answer)
	if err != nil {
		_ = conn.Close()
		p.close(reasonFailed, 0, "")
		c.say(handedOutcome{Peer: order.Join.Peer, Status: http.StatusBadRequest})
		return
	}
	told := make(chan struct{})
	go func() {
		defer close(told)
		select {
		case <-p.welcomed:
		case <-p.done:
		}
		c.say(handedOutcome{Peer: order.Join.Peer, Status: http.StatusSwitchingProtocols})
	}()
	s.runSignal(p, ice, ws)
	<-told
	c.say(handedOutcome{Peer: order.Join.Peer, Ended: true})
}

// answerRefused writes the refusal as the gateway answers a refused handshake and closes the
// connection; it returns the status sent.
func answerRefused(conn net.Conn, no *refusal) int {
	// the gateway's own texts for what its channel's refusals become (SignalSockets.ts, refusalOf)
	answer := envelope{Error: no.Error, Code: no.Code}
	status := no.Status
	switch no.Code {
	case "ROOM_FULL":
		status, answer.Code, answer.Hint = http.StatusServiceUnavailable, "UNAVAILABLE", "the room is at its participant cap; retry later"
	case "CONFLICT", "VALIDATION_FAILED":
	default:
		status = http.StatusServiceUnavailable
		answer = envelope{Error: "the media server did not take the join", Code: "UNAVAILABLE", Hint: "retry shortly"}
	}
	body, _ := json.Marshal(answer)
	retry := ""
	if status == http.StatusServiceUnavailable {
		retry = "retry-after: 5\r\n"
	}
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\ncache-control: no-store\r\n%sconnection: close\r\n\r\n",
		status, http.StatusText(status), len(body), retry)
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	_, _ = conn.Write(append([]byte(head), body...))
	_ = conn.Close()
	return status
}

// envelope is the API's refusal body, its members in the API's order.
type envelope struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Hint  string `json:"hint,omitempty"`
}

// handedWriter lets the upgrader answer a handshake whose request the gateway read: the
// connection is handed over as it is, nothing buffered.
type handedWriter struct {
	conn   net.Conn
	header http.Header
}

func (w *handedWriter) Header() http.Header         { return w.header }
func (w *handedWriter) Write(b []byte) (int, error) { return w.conn.Write(b) }

// WriteHeader is called only by a refusal of the upgrader's own (the gateway checked the
// handshake already); its text follows as the body of a connection that then closes.
func (w *handedWriter) WriteHeader(status int) {
	_, _ = fmt.Fprintf(w.conn, "HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n", status, http.StatusText(status))
}
func (w *handedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.conn == nil {
		return nil, nil, errors.New("hijacked already")
	}
	conn := w.conn
	return conn, bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn)), nil
}
