package tlsreload_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/server/tlsreload"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// serve accepts TLS connections on a loopback listener with r's config
// and completes their handshakes; it returns the address.
func serve(t *testing.T, r *tlsreload.Reloader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tl := tls.NewListener(ln, r.Config())
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte("ok"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr trusting pool, presenting client if not nil,
// and returns the server's leaf.
func dial(addr string, pool *x509.CertPool, client *tls.Certificate) (*x509.Certificate, error) {
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// With TLS 1.3 a refused client certificate shows on the first read.
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("ca")
	first := ca.Server("first")
	certFile, keyFile, err := first.Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r, err := tlsreload.New(tlsreload.Options{CertFile: certFile, KeyFile: keyFile,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	leaf, err := dial(addr, ca.Pool(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "first" {
		t.Fatalf("served %q, want first", leaf.Subject.CommonName)
	}

	second := ca.Server("second")
	if _, _, err := second.Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
	if leaf, err = dial(addr, ca.Pool(), nil); err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "second" {
		t.Fatalf("after the files changed, served %q, want second", leaf.Subject.CommonName)
	}
	if r.Reloads() != 1 || r.Failures() != 0 {
		t.Fatalf("reloads %d failures %d, want 1 and 0", r.Reloads(), r.Failures())
	}

	// A key that does not match: the last good pair stays, logged once.
	third := ca.Server("third")
	if err := testcerts.WriteFile(certFile, third.CertPEM); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if leaf, err = dial(addr, ca.Pool(), nil); err != nil {
			t.Fatal(err)
		}
		if leaf.Subject.CommonName != "second" {
			t.Fatalf("with a mismatched key, served %q, want the last good (second)", leaf.Subject.CommonName)
		}
	}
	if r.Failures() != 1 || strings.Count(logs.String(), "reload failed") != 1 {
		t.Fatalf("failures %d, logs:\n%s\nwant one failure logged once", r.Failures(), logs.String())
	}
	// Its key arrives: served.
	if err := testcerts.WriteFile(keyFile, third.KeyPEM); err != nil {
		t.Fatal(err)
	}
	if leaf, err = dial(addr, ca.Pool(), nil); err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "third" || r.Leaf().Subject.CommonName != "third" {
		t.Fatalf("served %q, want third", leaf.Subject.CommonName)
	}
	// A removed file is a failure too, and the pair stays.
	os.Remove(certFile)
	if leaf, err = dial(addr, ca.Pool(), nil); err != nil || leaf.Subject.CommonName != "third" {
		t.Fatalf("with the cert file removed: %v, %v; want third served", leaf, err)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA("ca"), testcerts.NewCA("other")
	certFile, keyFile, err := ca.Server("server").Write(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(dir, "clients")
	if err != nil {
		t.Fatal(err)
	}
	r, err := tlsreload.New(tlsreload.Options{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile,
		ClientSANs: []string{"spiffe://cluster/envoy", "envoy.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	good := ca.Client("envoy", nil, "spiffe://cluster/envoy").TLS()
	goodDNS := ca.Client("envoy", []string{"envoy.internal"}).TLS()
	wrongSAN := ca.Client("envoy", []string{"someone.else"}).TLS()
	wrongCA := other.Client("envoy", nil, "spiffe://cluster/envoy").TLS()
	for _, tc := range []struct {
		name   string
		client *tls.Certificate
		ok     bool
	}{
		{"uri SAN", &good, true},
		{"dns SAN", &goodDNS, true},
		{"no certificate", nil, false},
		{"another SAN", &wrongSAN, false},
		{"another CA", &wrongCA, false},
	} {
		_, err := dial(addr, ca.Pool(), tc.client)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("ca")
	certFile, keyFile, err := ca.Server("s").Write(dir, "s")
	if err != nil {
		t.Fatal(err)
	}
	empty := dir + "/empty.pem"
	os.WriteFile(empty, []byte("not pem"), 0o600)
	for _, o := range []tlsreload.Options{
		{CertFile: certFile},
		{CertFile: certFile, KeyFile: empty},
		{CertFile: dir + "/absent", KeyFile: keyFile},
		{CertFile: certFile, KeyFile: keyFile, ClientCAFile: empty},
		{CertFile: certFile, KeyFile: keyFile, ClientSANs: []string{"x"}},
	} {
		if _, err := tlsreload.New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]uint16{"": 0, "1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13, "tls12": tls.VersionTLS12,
		"TLS1_0": tls.VersionTLS10, "1.1": tls.VersionTLS11} {
		got, err := tlsreload.ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1.4", "ssl3", "x"} {
		if _, err := tlsreload.ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q): no error", in)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2", "TLSv1.3", "", "tls", "vvv", "1..2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := tlsreload.ParseVersion(s)
		if err == nil && v != 0 && (v < tls.VersionTLS10 || v > tls.VersionTLS13) {
			t.Fatalf("ParseVersion(%q) = %#x", s, v)
		}
		if err != nil && v != 0 {
			t.Fatal("a version with an error")
		}
	})
}

func BenchmarkHandshakeConfig(b *testing.B) {
	dir := b.TempDir()
	ca := testcerts.NewCA("ca")
	p := ca.Server("s")
	certFile, keyFile, _ := p.Write(dir, "s")
	r, err := tlsreload.New(tlsreload.Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		b.Fatal(err)
	}
	get := r.Config().GetConfigForClient
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := get(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandshake is a whole TLS 1.3 handshake over an in-memory pipe
// with the reloading config, to set BenchmarkHandshakeConfig's look at
// the files against what a handshake costs anyway.
func BenchmarkHandshake(b *testing.B) {
	dir := b.TempDir()
	ca := testcerts.NewCA("ca")
	certFile, keyFile, _ := ca.Server("s").Write(dir, "s")
	r, err := tlsreload.New(tlsreload.Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		b.Fatal(err)
	}
	srvCfg, cliCfg := r.Config(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	b.ReportAllocs()
	for b.Loop() {
		c, s := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- tls.Server(s, srvCfg).Handshake() }()
		if err := tls.Client(c, cliCfg).Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		c.Close()
		s.Close()
	}
}

func TestRegister(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("ca")
	p := ca.Server("s")
	certFile, keyFile, _ := p.Write(dir, "s")
	r, err := tlsreload.New(tlsreload.Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := r.Register(reg, "grpc"); err != nil {
		t.Fatal(err)
	}
	ca.Server("s2").Write(dir, "s")
	r.Config().GetConfigForClient(nil)
	want := fmt.Sprintf(`
# HELP sluice_tls_reloads_total Certificate reloads that succeeded after the files changed.
# TYPE sluice_tls_reloads_total counter
sluice_tls_reloads_total{listener="grpc"} 1
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_tls_reloads_total"); err != nil {
		t.Fatal(err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "sluice_tls_certificate_not_after_seconds" {
			if got := int64(mf.GetMetric()[0].GetGauge().GetValue()); got != r.Leaf().NotAfter.Unix() || got < time.Now().Unix() {
				t.Fatalf("not_after %d, want %d", got, r.Leaf().NotAfter.Unix())
			}
			return
		}
	}
	t.Fatal("no sluice_tls_certificate_not_after_seconds")
}
