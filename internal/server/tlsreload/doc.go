// Package tlsreload serves a TLS configuration whose certificate, key and
// client CA bundle are read from files and read again when they change,
// so that a rotated certificate (cert-manager, a Kubernetes Secret
// volume, certbot) is served without a restart.
//
// Every handshake looks at the files' modification times and sizes (one
// stat each; a handshake costs far more): when they differ from the last
// load, the files are read again. A pair that does not load (a key that
// does not match its certificate, a file half written, a CA bundle with
// no certificate) is logged once and the last good one kept, and the next
// change is tried again. Connections already open keep the certificate
// they were made with.
//
// With a client CA file, clients must present a certificate that chains
// to it (mutual TLS), and, with ClientSANs, one of whose subject
// alternative names (DNS, URI, IP or e-mail) is listed.
package tlsreload
