// Package proxies tests sluice's decision endpoint behind real proxies
// whose builds are too heavy for CI: Caddy, built here from the Go module
// proxy (github.com/caddyserver/caddy/v2, the version in go.mod). It is a
// module of its own so that Caddy's dependencies stay out of sluice's and
// bench's. Run: go test -run TestCaddy -v (the first build takes minutes).
package proxies
