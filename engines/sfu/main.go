// Portico's SFU: one pion/webrtc process per node that relays the real-time media of the rooms of
// every namespace (docs/webrtc.md). The gateway starts it on loopback, hands browsers a ticket it
// sealed with the shared key or passes their joins on its channel (mux.go), and relays their
// signalling here; nothing else reaches it.
//
// The files are split by concept: ticket.go (admission), turn.go (relay credentials), room.go
// (who is in which room), forward.go (whose media goes to whom), peer.go (one participant's
// connection and its negotiation), signal.go (the signalling socket), mux.go (the gateway's channel,
// its joins' signalling multiplexed on one socket), control.go (the gateway's endpoints) and
// events.go (participant reports to the gateway).
package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/stun/v4"
	"github.com/pion/webrtc/v4"
)

// config is the process's whole configuration; it comes from the environment the gateway sets.
type config struct {
	listen     string
	key        []byte // 32 bytes: the ticket key and, hex-encoded, the control bearer token
	node       string
	eventsURL  string
	turnURIs   []string
	turnSecret string
	turnTTL    time.Duration
	maxPeers   int   // per room
	maxRooms   int   // on this node
	maxFrame   int64 // signalling frame bytes
	maxData    int   // data-channel message bytes
}

func loadConfig() (*config, error) {
	c := &config{
		listen:     os.Getenv("SFU_LISTEN"),
		node:       os.Getenv("SFU_NODE"),
		eventsURL:  strings.TrimSpace(os.Getenv("SFU_EVENTS_URL")),
		turnSecret: os.Getenv("SFU_TURN_SECRET"),
	}
	if c.listen == "" {
		return nil, errors.New("SFU_LISTEN is required (host:port)")
	}
	key, err := hex.DecodeString(strings.TrimSpace(os.Getenv("SFU_KEY")))
	if err != nil || len(key) != 32 {
		return nil, errors.New("SFU_KEY must be 64 hex characters (32 bytes)")
	}
	c.key = key
	if c.eventsURL != "" {
		u, err := url.Parse(c.eventsURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("SFU_EVENTS_URL is not an http(s) URL: %q", c.eventsURL)
		}
	}
	for _, uri := range strings.Split(os.Getenv("SFU_TURN_URIS"), ",") {
		if uri = strings.TrimSpace(uri); uri == "" {
			continue
		}
		// pion parses ICE server URIs only when a peer connection is made; a bad one would then
		// fail every join, so it stops the process here instead.
		if _, err := stun.ParseURI(uri); err != nil {
			return nil, fmt.Errorf("SFU_TURN_URIS: %q: %v", uri, err)
		}
		c.turnURIs = append(c.turnURIs, uri)
	}
	ttl, err := envInt("SFU_TURN_TTL", 600)
	if err != nil {
		return nil, err
	}
	c.turnTTL = time.Duration(ttl) * time.Second
	if c.maxPeers, err = envInt("SFU_MAX_PEERS", 100); err != nil {
		return nil, err
	}
	if c.maxRooms, err = envInt("SFU_MAX_ROOMS", 1000); err != nil {
		return nil, err
	}
	maxFrame, err := envInt("SFU_MAX_FRAME", 1<<20)
	if err != nil {
		return nil, err
	}
	c.maxFrame = int64(maxFrame)
	if c.maxData, err = envInt("SFU_MAX_DATA", 16384); err != nil {
		return nil, err
	}
	return c, nil
}

// envInt reads a positive integer, or the default when the variable is unset or empty.
func envInt(name string, def int) (int, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s must be a positive integer, not %q", name, v)
	}
	return n, nil
}

// sfu ties the process together: the configuration, the pion API every peer connection is made
// from, the rooms, and the event reporter.
type sfu struct {
	cfg    *config
	ticket cipher.AEAD
	api    *webrtc.API
	rooms  *registry
	events *events
	// the gateway's channel (mux.go) that reports go on, while one is open
	channel atomic.Pointer[channel]
}

func newSFU(cfg *config) (*sfu, error) {
	block, err := aes.NewCipher(cfg.key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	media := &webrtc.MediaEngine{}
	if err := media.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	// The default interceptors answer NACKs from the packets recently sent and send receiver
	// reports; without them a lost packet is a visible glitch until the next keyframe.
	interceptors := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(media, interceptors); err != nil {
		return nil, err
	}
	settings := webrtc.SettingEngine{}
	// Browsers' .local host candidates are of no use to a relay-only server, and resolving them
	// would open a multicast socket per connection.
	settings.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if !cfg.turnEnabled() {
		// Without TURN (the tests) peers meet on host candidates, and a test's network namespace
		// may have nothing but loopback.
		settings.SetIncludeLoopbackCandidate(true)
	}
	api := webrtc.NewAPI(webrtc.WithMediaEngine(media), webrtc.WithInterceptorRegistry(interceptors),
		webrtc.WithSettingEngine(settings))
	s := &sfu{
		cfg:    cfg,
		ticket: aead,
		api:    api,
		rooms:  &registry{rooms: map[roomKey]*room{}, maxRooms: cfg.maxRooms, maxPeers: cfg.maxPeers},
	}
	s.events = newEvents(cfg.eventsURL, cfg.node, s.channel.Load)
	return s, nil
}

func (s *sfu) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.serveHealth)
	mux.HandleFunc("/signal", s.serveSignal)
	mux.HandleFunc("/rooms", s.serveRooms)
	mux.HandleFunc("/control", s.serveControl)
	mux.HandleFunc("/mux", s.serveMux)
	return mux
}

// shutdown closes every peer (each sends its leave event) and gives the reports up to 2 s to be
// delivered: the node is going away, and the gateway learns from the events who left.
func (s *sfu) shutdown() {
	deadline := time.Now().Add(2 * time.Second)
	peers := s.rooms.closeAll()
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.close(reasonLeft, 1001, "server shutting down")
		}()
	}
	waitUntil(&wg, deadline)
	s.events.wait(deadline)
}

// waitUntil waits for wg, or until the deadline, whichever comes first.
func waitUntil(wg *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(time.Until(deadline)):
		return false
	}
}

func main() {
	// No timestamps: the gateway captures stderr and stamps lines itself, and it waits for the
	// exact line "sfu listening <addr>".
	log.SetFlags(0)
	cfg, err := loadConfig()
	if err != nil {
		log.Printf("sfu: %v", err)
		os.Exit(2)
	}
	s, err := newSFU(cfg)
	if err != nil {
		log.Printf("sfu: %v", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		log.Printf("sfu: listen %s: %v", cfg.listen, err)
		os.Exit(1)
	}
	server := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()
	turn := "off (host candidates)"
	if cfg.turnEnabled() {
		turn = fmt.Sprintf("relay-only via %d URI(s)", len(cfg.turnURIs))
	}
	log.Printf("sfu node=%q turn=%s max_peers=%d max_rooms=%d events=%t", cfg.node, turn, cfg.maxPeers,
		cfg.maxRooms, cfg.eventsURL != "")
	log.Printf("sfu listening %s", ln.Addr())
	// With SFU_PARENT_STDIN=1 the gateway that runs this SFU holds its stdin open: its end is the
	// gateway gone, however it stopped (a SIGKILL leaves no one to send SIGTERM), and the rooms go
	// with it, so their peers rejoin on a node that is up.
	// Started by the gateway with node's IPC channel: it hands this server the sockets of the
	// joins it decided (handed.go).
	if fd, err := strconv.Atoi(os.Getenv("NODE_CHANNEL_FD")); err == nil && fd > 2 {
		go s.serveHanded(fd)
	}
	parentGone := make(chan struct{})
	if os.Getenv("SFU_PARENT_STDIN") == "1" {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(parentGone)
		}()
	}
	select {
	case err := <-served:
		log.Printf("sfu: serve: %v", err)
		os.Exit(1)
	case <-ctx.Done():
	case <-parentGone:
		log.Printf("sfu: the gateway is gone")
	}
	log.Printf("sfu shutting down")
	// Stop accepting first, so no peer joins while the others are being closed. Signalling
	// sockets are hijacked connections, which Shutdown leaves to s.shutdown.
	shutCtx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_ = server.Shutdown(shutCtx)
	cancel()
	s.shutdown()
	log.Printf("sfu stopped")
	os.Exit(0)
}
