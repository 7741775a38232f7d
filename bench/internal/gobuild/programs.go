package gobuild

// Caddy is the Caddy server with its standard modules (reverse_proxy,
// forward_auth).
var Caddy = Program{Name: "caddy", Module: "github.com/caddyserver/caddy/v2", Version: "v2.11.9", Pkg: "cmd/caddy"}

// Gubernator is gubernator's server (gRPC V1.GetRateLimits, peers found
// by memberlist gossip). v2.13.0 is its newest release that builds with
// Go 1.26 (later ones require a newer go).
var Gubernator = Program{Name: "gubernator", Module: "github.com/gubernator-io/gubernator/v2", Version: "v2.13.0", Pkg: "cmd/gubernator"}

// Traefik is the Traefik proxy, v3.6.12: the newest release whose whole
// dependency set the Go module proxy reachable here serves, and one whose
// RateLimit middleware has its Redis option. v3.7.11 to v3.7.13 moved to
// lego v5, and 14 of the DNS provider SDKs lego v5 requires at those
// versions (github.com/go-acme/alidns-20150109/v5 v5.6.1, ...) are refused
// (403 "not available"), as are those modules' version lists and
// Traefik's fork github.com/containous/go-http-auth at v3.7's
// pseudo-version; v3.6.12 uses lego v4.33.0, whose SDK versions, and its
// go-http-auth pseudo-version, are served.
//
// Its go.mod replaces modules with forks (go-http-auth, gorilla/mux,
// mailgun/minheap), so go install refuses it: it is built from its source
// as the main module, which applies those replace directives as they are
// (Prepare has nothing to add: the module's zip has the web UI's
// directory, with a placeholder file, that the binary embeds).
var Traefik = Program{Name: "traefik", Module: "github.com/traefik/traefik/v3", Version: "v3.6.12", Pkg: "cmd/traefik",
	Prepare: func(string) error { return nil },
	Ldflags: "-X github.com/traefik/traefik/v3/pkg/version.Version=v3.6.12"}
