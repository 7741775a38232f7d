package gateway

import (
	"fmt"
	"net/http"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// DefaultMaxConcurrentStreams is http2.max_concurrent_streams's default.
const DefaultMaxConcurrentStreams = 100

// HTTP2Config is the public listener's HTTP/2 (http2:). It is Go's
// net/http server's, with the same bounds as HTTP/1.1: the header list
// is bounded by connections.max_header_bytes, idle connections close
// after connections.idle_timeout, and each request's read_timeout and
// write_timeout apply to its stream.
type HTTP2Config struct {
	// Off (enabled: false) has the TLS listener offer HTTP/1.1 only.
	// Otherwise HTTP/2 is offered by ALPN ("h2") beside HTTP/1.1.
	Off bool
	// H2C (h2c: true) accepts cleartext HTTP/2 with prior knowledge on a
	// listener without tls: (behind a proxy that speaks it); the Upgrade
	// from HTTP/1.1 is not offered.
	H2C bool
	// MaxConcurrentStreams (max_concurrent_streams) is the most streams
	// (requests) a connection may have open at once. Go's server also
	// runs at most this many handlers a connection, and closes a
	// connection whose client resets streams faster than they finish
	// (the rapid reset attack).
	MaxConcurrentStreams int
}

// String describes h for logs.
func (h HTTP2Config) String() string {
	return fmt.Sprintf("enabled=%t h2c=%t max_concurrent_streams=%d", !h.Off, h.H2C, h.MaxConcurrentStreams)
}

func (d *decoder) http2(n *yaml.Node, h *HTTP2Config) (h2cLine int) {
	p := func(f string) string { return yamlnode.Join("http2", f) }
	d.fields(n, "http2", map[string]func(k, v *yaml.Node){
		"enabled": func(k, v *yaml.Node) { h.Off = !d.boolean(v, p("enabled")) },
		"h2c": func(k, v *yaml.Node) {
			if h.H2C = d.boolean(v, p("h2c")); h.H2C {
				h2cLine = v.Line
			}
		},
		"max_concurrent_streams": func(k, v *yaml.Node) {
			h.MaxConcurrentStreams = int(d.integer(v, p("max_concurrent_streams"), 1, 1<<16))
		},
	})
	return h2cLine
}

// protocols sets srv's protocols and HTTP/2 bounds from h: HTTP/1.1
// always, HTTP/2 over TLS unless Off, cleartext HTTP/2 with H2C.
func (h HTTP2Config) protocols(srv *http.Server, tls bool) {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(tls && !h.Off)
	p.SetUnencryptedHTTP2(!tls && h.H2C)
	srv.Protocols = &p
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: h.MaxConcurrentStreams}
}
