package main

// TURN credentials. Every peer connection is relay-only through Portico's coturn when TURN is
// configured: the SFU's own addresses are then never offered to browsers, and media takes the
// same path through the relay that the gateway's quotas and logs see. The credentials are the TURN
// REST scheme coturn checks itself (use-auth-secret), the same the gateway mints for clients.

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/pion/webrtc/v4"
)

func (c *config) turnEnabled() bool { return len(c.turnURIs) > 0 && c.turnSecret != "" }

// iceServer is one entry of the welcome frame's ice_servers, shaped as a browser's RTCIceServer.
type iceServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username"`
	Credential string   `json:"credential"`
}

// turnCredential mints username "<unix expiry>:<namespace>" and password base64(HMAC-SHA1(secret,
// username)). The namespace in the username is what coturn logs and applies its per-user quota to.
func (c *config) turnCredential(ns string, now time.Time) iceServer {
	username := fmt.Sprintf("%d:%s", now.Add(c.turnTTL).Unix(), ns)
	mac := hmac.New(sha1.New, []byte(c.turnSecret))
	mac.Write([]byte(username))
	return iceServer{URLs: c.turnURIs, Username: username, Credential: base64.StdEncoding.EncodeToString(mac.Sum(nil))}
}

// iceFor returns the peer connection configuration for a participant of namespace ns, and the
// same servers for its welcome frame: the SFU offers only relay addresses, and a client behind a
// NAT or a firewall that allows only the relay reaches them through the relay too.
func (c *config) iceFor(ns string, now time.Time) (webrtc.Configuration, []iceServer) {
	if !c.turnEnabled() {
		return webrtc.Configuration{ICETransportPolicy: webrtc.ICETransportPolicyAll}, []iceServer{}
	}
	cred := c.turnCredential(ns, now)
	return webrtc.Configuration{
		ICEServers: []webrtc.ICEServer{{
			URLs:           cred.URLs,
			Username:       cred.Username,
			Credential:     cred.Credential,
			CredentialType: webrtc.ICECredentialTypePassword,
		}},
		ICETransportPolicy: webrtc.ICETransportPolicyRelay,
	}, []iceServer{cred}
}
