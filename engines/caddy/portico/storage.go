package portico

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
)

func init() {
	caddy.RegisterModule(Storage{})
}

// Storage keeps Caddy's certificates, keys, ACME accounts and locks in the Portico registry
// through the local gateway, so every node's edge shares them (values are sealed by the gateway).
type Storage struct {
	// The local gateway, e.g. http://127.0.0.1:6001.
	Endpoint string `json:"endpoint,omitempty"`
	// The node's edge token file, <data dir>/edge.token.
	TokenFile string `json:"token_file,omitempty"`

	gateway *gateway
	locks   *lockTable
}

// lockTable is this process's held locks, by name.
type lockTable struct {
	mu   sync.Mutex
	held map[string]heldLock
}

// heldLock is one acquisition of a lock: its owner id at the gateway, and the stop of its renewal.
type heldLock struct {
	owner string
	stop  context.CancelFunc
}

func (Storage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.storage.portico", New: func() caddy.Module { return new(Storage) }}
}

func (s *Storage) Provision(caddy.Context) error {
	g, err := newGateway(s.Endpoint, s.TokenFile)
	if err != nil {
		return err
	}
	s.gateway = g
	s.locks = &lockTable{held: map[string]heldLock{}}
	return nil
}

func (s *Storage) CertMagicStorage() (certmagic.Storage, error) { return s, nil }

// notFound turns the gateway's 404 into the fs.ErrNotExist certmagic tests for.
func notFound(err error) error {
	var r *refusal
	if errors.As(err, &r) && r.status == http.StatusNotFound {
		return fs.ErrNotExist
	}
	return err
}

type storeOp struct {
	Op        string `json:"op"`
	Key       string `json:"key,omitempty"`
	Value     string `json:"value,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	Owner     string `json:"owner,omitempty"`
}

func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	return s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "store", Key: key, Value: base64.StdEncoding.EncodeToString(value)}, nil)
}

func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	var out struct {
		Value string `json:"value"`
	}
	if err := s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "load", Key: key}, &out); err != nil {
		return nil, notFound(err)
	}
	return base64.StdEncoding.DecodeString(out.Value)
}

func (s *Storage) Delete(ctx context.Context, key string) error {
	return s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "delete", Key: key}, nil)
}

func (s *Storage) Exists(ctx context.Context, key string) bool {
	var out struct {
		Exists bool `json:"exists"`
	}
	if err := s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "exists", Key: key}, &out); err != nil {
		return false
	}
	return out.Exists
}

func (s *Storage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	var out struct {
		Keys []string `json:"keys"`
	}
	if err := s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "list", Key: path, Recursive: recursive}, &out); err != nil {
		return nil, notFound(err)
	}
	return out.Keys, nil
}

func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	var out struct {
		Key      string `json:"key"`
		Modified int64  `json:"modified_ms"`
		Size     int64  `json:"size"`
		Terminal bool   `json:"terminal"`
	}
	if err := s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "stat", Key: key}, &out); err != nil {
		return certmagic.KeyInfo{}, notFound(err)
	}
	return certmagic.KeyInfo{Key: out.Key, Modified: time.UnixMilli(out.Modified), Size: out.Size, IsTerminal: out.Terminal}, nil
}

// lockRenewal is how often a held lock's lease (60 s at the gateway) is renewed.
const lockRenewal = 20 * time.Second

// Lock takes the named lock, waiting while anyone else holds it: another node's edge, or another
// goroutine of this one (certmagic locks from many at once), since each acquisition has an owner
// id of its own. A held lock is renewed until Unlock, so a crashed holder's lock lapses within the
// gateway's lease.
func (s *Storage) Lock(ctx context.Context, name string) error {
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	owner := hex.EncodeToString(id)
	for {
		err := s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "lock", Key: name, Owner: owner}, nil)
		if err == nil {
			break
		}
		var r *refusal
		if !errors.As(err, &r) || r.status != http.StatusConflict {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	renewing, stop := context.WithCancel(context.Background())
	s.locks.mu.Lock()
	s.locks.held[name] = heldLock{owner: owner, stop: stop}
	s.locks.mu.Unlock()
	go func() {
		for {
			select {
			case <-renewing.Done():
				return
			case <-time.After(lockRenewal):
				call, cancel := context.WithTimeout(renewing, 10*time.Second)
				_ = s.gateway.post(call, "/v1/internal/tls-store", storeOp{Op: "lock", Key: name, Owner: owner}, nil)
				cancel()
			}
		}
	}()
	return nil
}

func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.locks.mu.Lock()
	held, ok := s.locks.held[name]
	if ok {
		held.stop()
		delete(s.locks.held, name)
	}
	s.locks.mu.Unlock()
	if !ok {
		return nil
	}
	return s.gateway.post(ctx, "/v1/internal/tls-store", storeOp{Op: "unlock", Key: name, Owner: held.owner}, nil)
}

var (
	_ caddy.Provisioner      = (*Storage)(nil)
	_ caddy.StorageConverter = (*Storage)(nil)
	_ certmagic.Storage      = (*Storage)(nil)
)
