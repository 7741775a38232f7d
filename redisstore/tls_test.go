package redisstore_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// writeCerts makes a CA and a certificate for 127.0.0.1 signed by it, and
// returns the files' paths and the CA's pool.
func writeCerts(t *testing.T) (ca, cert, key string, pool *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", srvDER), write("key.pem", "EC PRIVATE KEY", keyDER), pool
}

func TestOpenTLS(t *testing.T) {
	ca, cert, key, pool := writeCerts(t)
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	redistest.Start(t, "--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	url := "rediss://127.0.0.1:" + strconv.Itoa(port)
	ctx := context.Background()

	s, err := redisstore.Open(ctx, url, redisstore.Options{TLSConfig: &tls.Config{RootCAs: pool}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		d, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(2), N: 1})
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("call %d over TLS: %+v, %v; want allowed only for the first 2", i, d, err)
		}
	}
	// Without the CA, the server's certificate is refused: Open fails,
	// since retrying would not change that. (A long timeout: a handshake
	// that timed out on a loaded machine would be an outage, and Open
	// would return a store that reconnects in the background.)
	if s, err := redisstore.Open(ctx, url, redisstore.Options{Timeout: 10 * time.Second}); err == nil {
		h := s.Health()
		s.Close()
		t.Fatalf("Open without the CA: no error; %v", h)
	}
}
