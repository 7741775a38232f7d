// Command sluice is one binary for both sides of HTTP 429:
//
//	sluice serve   the rate limiting gateway: a reverse proxy that limits each
//	               identity (user ID when authenticated, client IP when not) by
//	               route (docs/gateway.md)
//	sluice rls     a drop-in Envoy rate limit service: envoyproxy/ratelimit's
//	               gRPC API and config files (docs/rls.md)
//	sluice fetch   fetch URLs politely: per-host limits, AIMD, backoff,
//	               Retry-After (docs/client.md)
//	sluice sim     simulations of sluice's own components on a virtual clock,
//	               with tables and SVG figures (docs/simulations.md)
//	sluice check   validate gateway configs and rules files offline, every
//	               problem as file:line: path: message
//
// Every command takes --help. Exit status: 0 on success, 1 on failure, 2 for
// bad usage (with the reason on stderr). Servers log with log/slog to stderr
// and serve Prometheus metrics; SIGINT and SIGTERM drain them gracefully.
//
// Each command lives in its own file (serve.go, rls.go, fetch.go, sim.go,
// check.go) and is listed once, in main.go's commands table.
package main
