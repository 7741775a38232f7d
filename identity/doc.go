// Package identity decides who is calling: the user behind an API key, a
// JWT or a header set by a trusted proxy, or else the client's IP address.
//
// An authenticated caller is limited by user ID, pooled across all its
// devices and addresses; an anonymous one by client IP (or its IPv6 /64
// when configured). [Identity.Key] is that limiting key: "user:42" or
// "ip:203.0.113.7".
//
// Most callers build one [Resolver] with [NewResolver] and call
// [Resolver.Resolve] for each request:
//
//   - no credential: anonymous, by client IP;
//   - a valid credential: authenticated, by user;
//   - a bad, expired, unknown or malformed credential: an error wrapping
//     [ErrUnauthorized] (answer 401). A bad credential never falls back to
//     anonymous.
//
// The client IP is the connection's peer ([net/http.Request.RemoteAddr])
// unless that peer is a configured trusted proxy; only then is
// X-Forwarded-For (or Forwarded) read, right to left, skipping trusted
// hops: see [ClientIP]. Nothing is trusted by default.
//
// API keys are stored as SHA-256 hashes ([HashKey], [LoadKeyFile]) and
// presented as "Authorization: Bearer <key>" or "X-API-Key: <key>". JWTs
// (HS256, RS256, ES256) are verified with the standard library only; the
// algorithm is fixed by configuration, never taken from the token.
package identity
