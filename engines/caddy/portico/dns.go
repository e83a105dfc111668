package portico

import (
	"context"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/libdns/libdns"
)

func init() {
	caddy.RegisterModule(DNS{})
}

// DNS answers ACME DNS-01 challenges (the wildcard certificate of the base domain) by handing
// the TXT records to the gateway's /v1/internal/acme/present and cleanup.
type DNS struct {
	Endpoint  string `json:"endpoint,omitempty"`
	TokenFile string `json:"token_file,omitempty"`

	gateway *gateway
}

func (DNS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "dns.providers.portico", New: func() caddy.Module { return new(DNS) }}
}

func (d *DNS) Provision(caddy.Context) error {
	g, err := newGateway(d.Endpoint, d.TokenFile)
	if err != nil {
		return err
	}
	d.gateway = g
	return nil
}

type challenge struct {
	Fqdn  string `json:"fqdn"`
	Value string `json:"value"`
}

func (d *DNS) each(ctx context.Context, path, zone string, records []libdns.Record) ([]libdns.Record, error) {
	done := make([]libdns.Record, 0, len(records))
	for _, record := range records {
		rr := record.RR()
		if !strings.EqualFold(rr.Type, "TXT") {
			continue
		}
		fqdn := libdns.AbsoluteName(rr.Name, zone)
		if !strings.HasSuffix(fqdn, ".") {
			fqdn += "."
		}
		if err := d.gateway.post(ctx, path, challenge{Fqdn: fqdn, Value: rr.Data}, nil); err != nil {
			return done, err
		}
		done = append(done, record)
	}
	return done, nil
}

func (d *DNS) AppendRecords(ctx context.Context, zone string, records []libdns.Record) ([]libdns.Record, error) {
	return d.each(ctx, "/v1/internal/acme/present", zone, records)
}

func (d *DNS) DeleteRecords(ctx context.Context, zone string, records []libdns.Record) ([]libdns.Record, error) {
	return d.each(ctx, "/v1/internal/acme/cleanup", zone, records)
}

var (
	_ caddy.Provisioner     = (*DNS)(nil)
	_ certmagic.DNSProvider = (*DNS)(nil)
)
