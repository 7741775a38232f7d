// Package gateway is sluice's rate limiting reverse proxy, the server
// behind `sluice serve`: it puts per-identity limits in front of any HTTP
// API with one config file.
//
// A config (see [Parse]) names the public and admin addresses, the
// upstream (a URL, or builtin:echo, a demo API built in), the store
// (memory, or Redis for a fleet of gateways sharing one budget), how
// callers are identified (API keys, JWT, a header from a trusted proxy;
// else the client IP — nothing is trusted by default), the routes with
// their Envoy-style rate_limits actions, and the rules themselves in the
// envoyproxy/ratelimit format (package rules). Every problem in a config
// is reported at once, as "file:line: path: message".
//
// Most callers use [New] and [Gateway.Serve]:
//
//	cfg, err := gateway.ParseFile("gateway.yaml")
//	g, err := gateway.New(ctx, cfg, gateway.Options{Logger: log})
//	defer g.Close()
//	err = g.Serve(ctx, publicListener, adminListener)
//
// Routes are an http.ServeMux (segment boundaries, GET matches HEAD, the
// most specific pattern wins), and every request is first put in one
// canonical spelling: an encoded separator (%2F, %5C) is refused, an
// unclean path ("//", ".", "..", also as %2E) is redirected to the clean
// one, methods are upper-cased and hosts lowercased, so the upstream
// receives exactly the path that was matched and limited.
//
// Requests are limited by package httplimit and proxied with
// httputil.ReverseProxy (Rewrite, never Director; the client's
// X-Forwarded-* headers are replaced). The gateway owns the identity
// headers: from a peer that is not a trusted proxy, the user, tier and
// strip_headers headers are removed before limiting, and the resolved
// identity is forwarded in X-Sluice-User, X-Sluice-Tier and
// X-Sluice-Identity-Kind, whatever the client sent in those. Each
// listener caps its open connections (the longest-idle keep-alive
// connection gives way to a new one; with none idle the new one is
// closed) and bounds idle time, headers, bodies and responses (see
// ConnConfig). The admin listener serves
// Prometheus /metrics (decisions by rule and outcome, shadow denials,
// store errors, decision latency, reloads, open, refused and evicted
// connections per listener), /healthz and /readyz (503
// while draining).
//
// [Gateway.Reload] swaps in a new config atomically: limiter state lives
// in the store, keyed by the rules' descriptors, so unchanged rules keep
// their counters, and connections are never dropped. An invalid config
// is refused and the old one keeps serving; every reload is logged and
// counted once. [Gateway.Watch] reloads a config file when it, or a file
// it reads (API keys, JWT key, rules), changes. With the memory store, a
// snapshot file keeps state (calendar quotas above all) across restarts:
// it is written periodically and on [Gateway.Close], and restored by
// [New]; a journal beside it (snapshot.journal, on by default) carries
// the quotas' charges across a crash, losing at most
// snapshot.journal_interval (1 s) of them.
package gateway
