// Package portico holds the edge's two Caddy modules that speak to the Portico gateway on the
// same machine: the certificate storage (caddy.storage.portico, over /v1/internal/tls-store) and
// the DNS-01 provider (dns.providers.portico, over /v1/internal/acme/present and cleanup).
// Both authenticate with the node's edge token, a file the gateway writes in its data directory
// (docs/edge.md).
package portico

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// gateway is one gateway's internal edge routes, called with the node's edge token.
type gateway struct {
	endpoint string
	token    string
	client   *http.Client
}

func newGateway(endpoint, tokenFile string) (*gateway, error) {
	if endpoint == "" {
		return nil, fmt.Errorf("portico: endpoint is required (the local gateway, e.g. http://127.0.0.1:6001)")
	}
	if tokenFile == "" {
		return nil, fmt.Errorf("portico: token_file is required (<data dir>/edge.token)")
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("portico: reading the edge token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return nil, fmt.Errorf("portico: the edge token file %s is empty", tokenFile)
	}
	return &gateway{
		endpoint: strings.TrimRight(endpoint, "/"),
		token:    token,
		client:   &http.Client{Timeout: 30 * time.Second},
	}, nil
}

// refusal is a gateway answer other than 200: its status and the body's code.
type refusal struct {
	status int
	code   string
	text   string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("portico gateway answered %d %s: %s", r.status, r.code, r.text)
}

// post sends body as JSON to path and decodes a 200 answer into out (when not nil).
func (g *gateway) post(ctx context.Context, path string, body any, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.token)
	res, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		var wire struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		_ = json.Unmarshal(answer, &wire)
		return &refusal{status: res.StatusCode, code: wire.Code, text: wire.Error}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}
