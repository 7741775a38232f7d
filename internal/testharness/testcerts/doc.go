// Package testcerts makes certificate authorities and certificates for
// tests: an ECDSA P-256 CA, server certificates for 127.0.0.1 and
// localhost, client certificates with chosen subject alternative names,
// written as PEM files where servers read them.
package testcerts
