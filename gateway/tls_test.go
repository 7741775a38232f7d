package gateway_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// httpsGet GETs url over a new connection, trusting ca and presenting
// client (none if nil); it returns the status and the served
// certificate's common name.
func httpsGet(url string, ca *testcerts.CA, client *testcerts.Pair) (int, string, error) {
	cfg := &tls.Config{RootCAs: ca.Pool()}
	if client != nil {
		cfg.Certificates = []tls.Certificate{client.TLS()}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName, nil
}

func writeCerts(t *testing.T, dir string, ca *testcerts.CA, cn string) {
	t.Helper()
	if _, _, err := ca.Server(cn).Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
}

// TestTLSReload: the gateway serves HTTPS; once the certificate is
// replaced on disk, a new connection is served the new one; a pair that
// does not load leaves the last good one served.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("gateway test CA")
	writeCerts(t, dir, ca, "gw-1")
	s := start(t, dir, baseConfig+"tls: {cert_file: server.crt, key_file: server.key, min_version: \"1.2\"}\n")
	url := strings.Replace(s.url, "http://", "https://", 1) + "/hello"

	code, cn, err := httpsGet(url, ca, nil)
	if err != nil || code != http.StatusOK || cn != "gw-1" {
		t.Fatalf("HTTPS: %d, %q, %v; want 200 from gw-1", code, cn, err)
	}
	// Cleartext is refused (Go answers 400 to HTTP on a TLS port).
	if resp, err := http.Get(s.url + "/hello"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("cleartext to the TLS listener: %d, want 400", resp.StatusCode)
		}
	}

	writeCerts(t, dir, ca, "gw-2")
	if code, cn, err = httpsGet(url, ca, nil); err != nil || code != http.StatusOK || cn != "gw-2" {
		t.Fatalf("after replacing the files: %d, %q, %v; want 200 from gw-2", code, cn, err)
	}

	// A reload that drops tls: is logged as needing a restart; HTTPS
	// goes on.
	c, err := gateway.Parse(s.file, []byte(baseConfig))
	must(t, err)
	must(t, s.g.Reload(c))
	if code, cn, err = httpsGet(url, ca, nil); err != nil || cn != "gw-2" {
		t.Fatalf("after a reload without tls: %d, %q, %v; want gw-2 still (restart needed)", code, cn, err)
	}

	// A certificate whose key has not arrived yet: gw-2 still served.
	if err := testcerts.WriteFile(filepath.Join(dir, "server.crt"), ca.Server("gw-3").CertPEM); err != nil {
		t.Fatal(err)
	}
	if code, cn, err = httpsGet(url, ca, nil); err != nil || cn != "gw-2" {
		t.Fatalf("with a mismatched pair: %d, %q, %v; want gw-2 still", code, cn, err)
	}
}

// TestTLSClientCerts: with client_ca_file, only clients with a
// certificate from that CA are served.
func TestTLSClientCerts(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA("gateway test CA"), testcerts.NewCA("another CA")
	writeCerts(t, dir, ca, "gw")
	if _, err := ca.WriteCA(dir, "clients"); err != nil {
		t.Fatal(err)
	}
	s := start(t, dir, baseConfig+"tls:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: clients.crt\n")
	url := strings.Replace(s.url, "http://", "https://", 1) + "/hello"
	good := ca.Client("app", []string{"app.internal"})
	if code, _, err := httpsGet(url, ca, &good); err != nil || code != http.StatusOK {
		t.Fatalf("with a client certificate: %d, %v", code, err)
	}
	bad := other.Client("app", []string{"app.internal"})
	for name, client := range map[string]*testcerts.Pair{"no certificate": nil, "another CA": &bad} {
		if code, _, err := httpsGet(url, ca, client); err == nil {
			t.Errorf("%s: served %d", name, code)
		}
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA("ca")
	writeCerts(t, dir, ca, "gw")
	os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("junk"), 0o600)
	for _, tc := range []struct{ tls, want string }{
		{"tls: {cert_file: server.crt}", ":6: tls: cert_file and key_file are both required"},
		{"tls: {cert_file: server.crt, key_file: junk.pem}", ":6: tls: /"},
		{"tls: {cert_file: server.crt, key_file: server.key, client_ca_file: junk.pem}", "no PEM certificate"},
		{"tls: {cert_file: server.crt, key_file: server.key, min_version: \"1.0\"}", "tls.min_version: want 1.2 or 1.3"},
		{"tls: {cert_file: server.crt, key_file: server.key, min_vers: \"1.3\"}", "min_vers"},
	} {
		cfg := "listen: 127.0.0.1:0\nupstream: builtin:echo\nrules: {domain: t}\nroutes: [{path: /}]\n\n" + tc.tls + "\n"
		file := filepath.Join(dir, "gateway.yaml")
		must(t, os.WriteFile(file, []byte(cfg), 0o644))
		_, err := gateway.ParseFile(file)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.tls, err, tc.want)
		} else {
			t.Log(err)
		}
	}
}
