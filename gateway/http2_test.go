package gateway_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// h2Client speaks HTTP/2 only: over TLS (ALPN h2) trusting ca, or in
// cleartext with prior knowledge (h2c) when ca is nil.
func h2Client(ca *testcerts.CA) *http.Client {
	var p http.Protocols
	tr := &http.Transport{Protocols: &p}
	if ca != nil {
		p.SetHTTP2(true)
		tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}}
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Client{Transport: tr}
}

// limitedOverH2 GETs url five times with c: HTTP/2 each, three answered
// (baseConfig's per-IP limit), then 429 with its headers.
func limitedOverH2(t *testing.T, c *http.Client, url string, hdr ...string) {
	t.Helper()
	for i := range 5 {
		req, _ := http.NewRequest("GET", url, nil)
		for j := 0; j+1 < len(hdr); j += 2 {
			req.Header.Set(hdr[j], hdr[j+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		if resp.ProtoMajor != 2 || resp.StatusCode != want {
			t.Fatalf("request %d: %s %d, want HTTP/2 %d", i, resp.Proto, resp.StatusCode, want)
		}
		if want == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "") {
			t.Errorf("429 over HTTP/2 without Retry-After or RateLimit: %v", resp.Header)
		}
	}
}

// TestHTTP2OverTLS: the TLS listener offers h2 by ALPN; a limited
// route's 429 comes with its headers; the connection is counted and
// released; a header list over
// max_header_bytes is beyond the limit the server advertises; with http2.enabled
// false, ALPN settles on HTTP/1.1.
func TestHTTP2OverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("gateway test CA")
	writeCerts(t, dir, ca, "127.0.0.1")
	tlsCfg := "tls: {cert_file: server.crt, key_file: server.key}\n"
	s := start(t, dir, baseConfig+tlsCfg+"connections: {max_header_bytes: 4096}\nhttp2: {max_concurrent_streams: 50}\n")
	url := strings.Replace(s.url, "http://", "https://", 1) + "/hello"
	c := h2Client(ca)
	limitedOverH2(t, c, url)
	// One connection for the five requests, counted toward
	// connections.max, and released when it closes.
	if got := gauge(t, s, "public"); got != "1" {
		t.Errorf("open public connections after 5 HTTP/2 requests: %s, want 1", got)
	}
	c.CloseIdleConnections()
	waitFor(t, "open public connections back to 0", func() bool { return gauge(t, s, "public") == "0" })
	c = h2Client(ca)

	// Go's client holds to the limit the server advertised in its
	// SETTINGS (MAX_HEADER_LIST_SIZE) and refuses to send, once it has
	// them: a first request on the connection waits for them.
	resp, err := c.Get(url)
	must(t, err)
	resp.Body.Close()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Big", strings.Repeat("b", 16<<10))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("16 KiB header over HTTP/2 with max_header_bytes 4096: %d, want 431", resp.StatusCode)
		}
	} else if !strings.Contains(err.Error(), "advertised limit") {
		t.Errorf("16 KiB header over HTTP/2 with max_header_bytes 4096: %v, want the advertised limit refused", err)
	}

	s2 := start(t, dir, baseConfig+tlsCfg+"http2: {enabled: false}\n")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2", "http/1.1"}}, ForceAttemptHTTP2: true}
	resp, err = (&http.Client{Transport: tr}).Get(strings.Replace(s2.url, "http://", "https://", 1) + "/hello")
	must(t, err)
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("http2.enabled false: %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
}

// TestH2C: with http2.h2c, a cleartext HTTP/2 client (prior knowledge)
// is served and limited; without, it is not served.
func TestH2C(t *testing.T) {
	s := start(t, "", baseConfig+"http2: {h2c: true}\n")
	limitedOverH2(t, h2Client(nil), s.url+"/hello")

	s2 := start(t, "", baseConfig)
	if resp, err := h2Client(nil).Get(s2.url + "/hello"); err == nil {
		resp.Body.Close()
		t.Errorf("h2c without http2.h2c: %s %d, want no HTTP/2 answer", resp.Proto, resp.StatusCode)
	}
}

// TestListenerConfigErrors: proxy_protocol and http2 are read strictly,
// each problem at its line.
func TestListenerConfigErrors(t *testing.T) {
	const base = "upstream: builtin:echo\nroutes: [{path: /}]\n"
	for _, c := range []struct{ cfg, want string }{
		{"proxy_protocol: {required: true}\n", "gw.yaml:3: proxy_protocol.trusted: list the load balancers' addresses"},
		{"proxy_protocol: {trusted: [10.0.0.0/33]}\n", "gw.yaml:3: proxy_protocol.trusted[0]: want an IP address or CIDR prefix"},
		{"proxy_protocol:\n  trusted: [10.0.0.1]\n  requierd: true\n", `gw.yaml:5: proxy_protocol: unknown field "requierd" (did you mean "required"?)`},
		{"http2: {max_concurrent_streams: 0}\n", "gw.yaml:3: http2.max_concurrent_streams:"},
		{"http2: {enabled: maybe}\n", "gw.yaml:3: http2.enabled:"},
		{"tls: {cert_file: a, key_file: b}\nhttp2:\n  h2c: true\n", "gw.yaml:5: http2.h2c: h2c is HTTP/2 in cleartext"},
	} {
		_, err := gateway.Parse("gw.yaml", []byte(base+c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.cfg, err, c.want)
		}
	}
	cfg, err := gateway.Parse("gw.yaml", []byte(base+"proxy_protocol: {trusted: [10.0.0.1, 192.168.0.0/16], required: true}\nhttp2: {h2c: true}\n"))
	must(t, err)
	if got := cfg.ProxyProtocol.String(); got != "trusted=10.0.0.1/32,192.168.0.0/16 required=true" {
		t.Errorf("proxy_protocol: %s", got)
	}
	if !cfg.HTTP2.H2C || cfg.HTTP2.Off || cfg.HTTP2.MaxConcurrentStreams != gateway.DefaultMaxConcurrentStreams {
		t.Errorf("http2: %s", cfg.HTTP2)
	}
}

// TestProxyProtocolUnderTLS: the PROXY header comes before the TLS
// handshake, and its client is the address the per-IP limit counts, over
// HTTP/2 too.
func TestProxyProtocolUnderTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("gateway test CA")
	writeCerts(t, dir, ca, "127.0.0.1")
	s := start(t, dir, baseConfig+"tls: {cert_file: server.crt, key_file: server.key}\nproxy_protocol: {trusted: [127.0.0.1], required: true}\n")
	addr := strings.TrimPrefix(s.url, "http://")
	for _, src := range []string{"198.51.100.1", "198.51.100.2"} {
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: ca.Pool()},
			ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, a)
				if err == nil {
					_, err = fmt.Fprintf(c, "PROXY TCP4 %s 10.0.0.1 40000 443\r\n", src)
				}
				return c, err
			},
		}
		limitedOverH2(t, &http.Client{Transport: tr}, "https://"+addr+"/hello")
		tr.CloseIdleConnections()
	}
}
