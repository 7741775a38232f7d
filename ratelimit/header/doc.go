// Package header is the rate limit header vocabulary of both sides of 429:
// the modes (IETF's RateLimit-Policy and RateLimit, the legacy
// X-RateLimit-* family, or none) and the writer that both front doors use
// (the gateway's responses and the RLS's response_headers_to_add), from one
// list of policies, so that a mode means the same through either. Names
// renames the legacy headers as envoyproxy/ratelimit's LIMIT_*_HEADER
// settings do (EnvoyNames are its defaults).
package header
