// Package sfv writes the structured field values of RFC 8941 that sluice's
// rate limit headers (draft-ietf-httpapi-ratelimit-headers) need: the
// gateway's RateLimit/RateLimit-Policy and the RLS's response_headers_to_add
// share it.
package sfv
