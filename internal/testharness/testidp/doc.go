// Package testidp is an identity provider for tests: a JWKS endpoint on
// loopback that serves the public keys given to it (or any body), counts
// its fetches, and signs tokens with go-jose.
package testidp
