// Package proxies tests sluice's decision endpoint behind real proxies
// whose builds are too heavy for CI: Caddy, built here from the Go module
// proxy (github.com/caddyserver/caddy/v2, the version in go.mod), and
// Traefik, built from the Go module proxy into the user cache by package
// bench/internal/gobuild (its go.mod's replace directives keep it out of
// any go.mod here). It is a module of its own so that Caddy's
// dependencies stay out of sluice's and bench's. Run:
//
//	go test -run 'TestCaddy|TestTraefik' -v
//
// The first Caddy build takes minutes; TestTraefik skips, saying how to
// build it, when Traefik is not in the cache (about 15 minutes to build,
// once: cd bench && go run ./internal/gobuild/cmd/gobuild traefik).
package proxies
