package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, PEM
}

// NewCA returns a new self-signed CA named name, valid for a day. The
// functions of this package panic if the crypto library fails (it does
// not with its own keys): they are for tests.
func NewCA(name string) *CA {
	ca, err := newCA(name)
	if err != nil {
		panic(err)
	}
	return ca
}

func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Pair is an issued certificate and its key, PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS() tls.Certificate {
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		panic(err)
	}
	return c
}

// Server issues a server certificate named cn for 127.0.0.1, ::1 and
// localhost.
func (ca *CA) Server(cn string) Pair {
	return ca.must(ca.issue(cn, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []string{"localhost"}, true, nil))
}

// ServerNamed issues a server certificate named cn for the DNS names dns
// only: a client that checks it for 127.0.0.1 refuses it.
func (ca *CA) ServerNamed(cn string, dns ...string) Pair {
	return ca.must(ca.issue(cn, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, dns, false, nil))
}

// Peer issues a certificate named cn that serves (for 127.0.0.1, ::1,
// localhost and dns) and is presented as a client certificate too, as
// one Kubernetes Secret does for a pod that is both.
func (ca *CA) Peer(cn string, dns ...string) Pair {
	return ca.must(ca.issue(cn, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		append([]string{"localhost"}, dns...), true, nil))
}

// Client issues a client certificate named cn whose subject alternative
// names are dns (DNS names) and uris.
func (ca *CA) Client(cn string, dns []string, uris ...string) Pair {
	return ca.must(ca.issue(cn, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, dns, false, uris))
}

func (*CA) must(p Pair, err error) Pair {
	if err != nil {
		panic(err)
	}
	return p
}

func (ca *CA) issue(cn string, usages []x509.ExtKeyUsage, dns []string, loopback bool, uris []string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
		DNSNames:     dns,
	}
	if loopback {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			return Pair{}, err
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Leaf:    leaf,
	}, nil
}

// Write writes the pair to dir/name.crt and dir/name.key (replacing
// them: each is written to a temporary file and renamed, as a Secret
// volume or cert-manager swaps them) and returns the two paths.
func (p Pair) Write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := WriteFile(certFile, p.CertPEM); err != nil {
		return "", "", err
	}
	if err := WriteFile(keyFile, p.KeyPEM); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// WriteCA writes the CA certificate to dir/name.crt and returns its path.
func (ca *CA) WriteCA(dir, name string) (string, error) {
	f := filepath.Join(dir, name+".crt")
	return f, WriteFile(f, ca.PEM)
}

// WriteFile replaces path with data through a rename, its modification
// time a second after the previous one's at least, so that a reloader
// comparing times sees the change whatever the file system's clock
// granularity.
func WriteFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	mt := time.Now()
	if fi, err := os.Stat(path); err == nil && !mt.After(fi.ModTime().Add(time.Second)) {
		mt = fi.ModTime().Add(time.Second)
	}
	if err := os.Chtimes(tmp, mt, mt); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
