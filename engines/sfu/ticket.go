package main

// A ticket is the gateway's say-so that one participant may join one room: the gateway checks the
// caller's credentials, admission and the namespace's media settings, then seals a ticket with
// the key it shares with this process. The SFU checks nothing else, so a ticket must be
// unforgeable and unreadable (it names the participant's event key): AES-256-GCM, not a MAC over
// readable JSON.

import (
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

const (
	ticketPrefix = "v1."
	// The additional data binds a sealed blob to this use of the key: the same key is the
	// control bearer token, and nothing else sealed with it opens as a ticket.
	ticketAD       = "portico-sfu-ticket-v1"
	ticketNonceLen = 12
	// Far more than a real ticket; it bounds the work an anonymous caller can ask for.
	ticketMaxLen = 8192
)

type ticket struct {
	NS     string `json:"ns"`
	Room   string `json:"room"`
	User   string `json:"user"`
	Device string `json:"device"`
	Peer   string `json:"peer"`
	Exp    int64  `json:"exp"`
	Muted  bool   `json:"muted"`
	EK     string `json:"ek"`

	eventKey []byte // EK decoded: the HMAC key of this participant's join and leave reports
}

var errTicket = errors.New("ticket refused")

// openTicket opens "v1." + base64url(nonce || AES-256-GCM(JSON)) and refuses a ticket that does
// not open, is incomplete, or whose exp is in the past.
func openTicket(aead cipher.AEAD, s string, now time.Time) (*ticket, error) {
	if len(s) > ticketMaxLen || !strings.HasPrefix(s, ticketPrefix) {
		return nil, errTicket
	}
	raw, err := base64.RawURLEncoding.DecodeString(s[len(ticketPrefix):])
	if err != nil || len(raw) < ticketNonceLen+aead.Overhead() {
		return nil, errTicket
	}
	plain, err := aead.Open(nil, raw[:ticketNonceLen], raw[ticketNonceLen:], []byte(ticketAD))
	if err != nil {
		return nil, errTicket
	}
	var t ticket
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, errTicket
	}
	if t.Exp < now.Unix() {
		return nil, errors.New("ticket expired")
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	return &t, nil
}

// check refuses a ticket (sealed, or a join on the gateway's channel) that lacks ns, room or peer,
// and decodes its event key.
func (t *ticket) check() error {
	if t.NS == "" || t.Room == "" || t.Peer == "" {
		return errors.New("ticket lacks ns, room or peer")
	}
	// Only the gateway can seal a ticket, so a bad ek is the gateway's bug; refusing the ticket
	// says so at once instead of as reports the gateway cannot verify.
	var err error
	if t.eventKey, err = hex.DecodeString(t.EK); err != nil || len(t.eventKey) != 32 {
		return errors.New("ticket ek is not 64 hex characters")
	}
	return nil
}
