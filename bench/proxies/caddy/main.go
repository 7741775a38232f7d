// Command caddy is Caddy with its standard modules, built from the Go
// module proxy at the version in this module's go.mod, for the decision
// endpoint's Caddy test (caddy_test.go).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() { caddycmd.Main() }
