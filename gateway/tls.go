package gateway

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/internal/server/tlsreload"
)

// TLSConfig is the public listener's TLS (tls:). Its files are read
// again when they change (a renewed certificate is served to the next
// connection; a bad one is logged and the last good one kept); the
// section itself is read at start only.
type TLSConfig struct {
	CertFile string // cert_file: the PEM certificate chain
	KeyFile  string // key_file: its PEM private key
	// ClientCAFile (client_ca_file), when set, is a PEM CA bundle that
	// client certificates must chain to: clients without one are
	// refused at the handshake.
	ClientCAFile string
	// MinVersion (min_version: "1.2" or "1.3") is the lowest TLS version
	// accepted; default 1.2.
	MinVersion uint16
}

// String describes t for logs ("off" when nil); the files' contents are
// not part of it (they reload by themselves).
func (t *TLSConfig) String() string {
	if t == nil {
		return "off"
	}
	return fmt.Sprintf("cert_file=%s key_file=%s client_ca_file=%s min_version=%#x", t.CertFile, t.KeyFile, t.ClientCAFile, t.MinVersion)
}

// options are the tlsreload options of t, offering HTTP/2 by ALPN
// when h2 (see HTTP2Config).
func (t *TLSConfig) options(h2 bool) tlsreload.Options {
	protos := []string{"http/1.1"}
	if h2 {
		protos = []string{"h2", "http/1.1"}
	}
	return tlsreload.Options{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile,
		MinVersion: t.MinVersion, NextProtos: protos}
}

// tlsSection reads tls: and checks that its files load, so that a bad
// path or a mismatched pair is an error at its line, before anything
// listens.
func (d *decoder) tlsSection(n *yaml.Node, rel func(string) string) *TLSConfig {
	t := &TLSConfig{}
	p := func(f string) string { return yamlnode.Join("tls", f) }
	d.fields(n, "tls", map[string]func(k, v *yaml.Node){
		"cert_file":      func(k, v *yaml.Node) { t.CertFile = rel(d.str(v, p("cert_file"))) },
		"key_file":       func(k, v *yaml.Node) { t.KeyFile = rel(d.str(v, p("key_file"))) },
		"client_ca_file": func(k, v *yaml.Node) { t.ClientCAFile = rel(d.str(v, p("client_ca_file"))) },
		"min_version": func(k, v *yaml.Node) {
			mv, err := tlsreload.ParseVersion(d.str(v, p("min_version")))
			if err == nil && mv != 0 && mv < tls.VersionTLS12 {
				d.add(v.Line, p("min_version"), "want 1.2 or 1.3, got %s", yamlnode.Kind(v))
				return
			}
			if err != nil {
				d.add(v.Line, p("min_version"), "want 1.2 or 1.3, got %s", yamlnode.Kind(v))
			}
			t.MinVersion = mv
		},
	})
	if t.CertFile == "" || t.KeyFile == "" {
		d.add(n.Line, "tls", "cert_file and key_file are both required")
		return t
	}
	if d.readFile == nil {
		if _, err := tlsreload.New(t.options(false)); err != nil {
			d.add(n.Line, "tls", "%s", strings.TrimPrefix(err.Error(), "tls: "))
		}
	}
	return t
}

// serveTLS serves pub on ln with t's certificate, reloaded when its files
// change; HTTP/2 too when h2.
func (g *Gateway) serveTLS(pub *http.Server, ln net.Listener, t *TLSConfig, h2 bool) error {
	o := t.options(h2)
	o.Logger = g.log
	r, err := tlsreload.New(o)
	if err != nil {
		return err
	}
	if err := r.Register(g.registry, "public"); err != nil {
		g.log.Warn("gateway: TLS metrics not registered", "err", err)
	}
	pub.TLSConfig = r.Config()
	if !h2 {
		pub.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // HTTP/1.1 only
	}
	if cs := pub.ConnState; cs != nil {
		// The connection limiter knows the connections it accepted, under
		// the TLS layer.
		pub.ConnState = func(c net.Conn, st http.ConnState) {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			cs(c, st)
		}
	}
	return pub.ServeTLS(ln, "", "")
}
