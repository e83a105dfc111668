// The edge's Caddy: the standard distribution plus Portico's storage module and DNS provider
// (package portico), built by scripts/engines.sh. docs/edge.md says how it is run.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "portico.local/edge/portico"
)

func main() {
	caddycmd.Main()
}
