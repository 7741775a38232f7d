package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options names the files of a Reloader and how it serves them.
type Options struct {
	// CertFile and KeyFile are the PEM certificate chain and its private
	// key. Both are required.
	CertFile, KeyFile string
	// ClientCAFile, when set, is a PEM bundle of the CAs client
	// certificates must chain to: clients without a certificate, or with
	// one it does not verify, are refused (mutual TLS).
	ClientCAFile string
	// ClientSANs, with ClientCAFile, lists the subject alternative names
	// (DNS names, URIs, IP addresses or e-mail addresses) of which a
	// client certificate must carry one; empty accepts any verified
	// client.
	ClientSANs []string
	// MinVersion is the lowest TLS version accepted. Default TLS 1.2.
	MinVersion uint16
	// NextProtos are the ALPN protocols offered, in order of preference
	// ("h2" for gRPC).
	NextProtos []string
	// Logger receives reloads (info) and failed loads (error). Default:
	// none.
	Logger *slog.Logger
}

// Reloader serves the certificate of its files, reloading them when they
// change. It is safe for concurrent use.
type Reloader struct {
	o    Options
	log  *slog.Logger
	base *tls.Config

	cur atomic.Pointer[loaded]

	mu      sync.Mutex // serializes reloads
	tried   stamp      // the files' stamp at the last attempt
	reloads atomic.Int64
	fails   atomic.Int64
}

// loaded is one good load: the config handshakes get.
type loaded struct {
	cfg      *tls.Config
	cert     *x509.Certificate // the leaf served
	stamp    stamp
	loadedAt time.Time
}

// stamp is what a reload compares: each file's size and modification time.
type stamp [3]struct {
	size  int64
	mtime time.Time
	err   bool
}

// ParseVersion parses a TLS version as configs spell it: "1.0" to "1.3"
// (also "TLS1.2", "tls12", "TLSv1_2", case-insensitive); empty is 0 (the
// default).
func ParseVersion(s string) (uint16, error) {
	norm := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c == '.' || c == '_' || c == 'v' {
			continue
		}
		norm = append(norm, c)
	}
	v := string(norm)
	if len(v) > 3 && v[:3] == "tls" {
		v = v[3:]
	}
	switch v {
	case "":
		return 0, nil
	case "10":
		return tls.VersionTLS10, nil
	case "11":
		return tls.VersionTLS11, nil
	case "12":
		return tls.VersionTLS12, nil
	case "13":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("TLS version %q: want 1.0, 1.1, 1.2 or 1.3", s)
}

// New loads the files and returns a Reloader serving them; an error if
// they do not load (there is no previous certificate to keep).
func New(o Options) (*Reloader, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	if len(o.ClientSANs) > 0 && o.ClientCAFile == "" {
		return nil, errors.New("tls: allowed client SANs need a client CA file")
	}
	if o.MinVersion == 0 {
		o.MinVersion = tls.VersionTLS12
	}
	r := &Reloader{o: o, log: o.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.base = &tls.Config{MinVersion: o.MinVersion, NextProtos: slices.Clone(o.NextProtos)}
	st := r.stat()
	l, err := r.load(st)
	if err != nil {
		return nil, err
	}
	r.tried = st
	r.cur.Store(l)
	return r, nil
}

// Config returns the configuration to serve with (tls.NewListener,
// credentials.NewTLS, http.Server.TLSConfig): each handshake gets the
// files' current certificate.
func (r *Reloader) Config() *tls.Config {
	c := r.base.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.current().cfg, nil }
	// Serving with Config directly (no GetConfigForClient support in the
	// caller) still reloads.
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &r.current().cfg.Certificates[0], nil }
	return c
}

// Leaf returns the certificate being served.
func (r *Reloader) Leaf() *x509.Certificate { return r.current().cert }

// Reloads counts the loads after the first that succeeded; Failures,
// those that did not.
func (r *Reloader) Reloads() int64  { return r.reloads.Load() }
func (r *Reloader) Failures() int64 { return r.fails.Load() }

// current reloads if the files changed since the last attempt and returns
// the good config.
func (r *Reloader) current() *loaded {
	l := r.cur.Load()
	st := r.stat()
	if st == l.stamp {
		return l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st == r.tried {
		// Tried already and failed (or another handshake loaded it).
		return r.cur.Load()
	}
	r.tried = st
	nl, err := r.load(st)
	if err != nil {
		r.fails.Add(1)
		r.log.Error("tls: reload failed, serving the last good certificate", "cert_file", r.o.CertFile, "err", err,
			"serving_not_after", l.cert.NotAfter)
		return r.cur.Load()
	}
	r.reloads.Add(1)
	r.cur.Store(nl)
	r.log.Info("tls: certificate reloaded", "cert_file", r.o.CertFile, "subject", nl.cert.Subject.String(),
		"not_after", nl.cert.NotAfter)
	return nl
}

func (r *Reloader) files() [3]string { return [3]string{r.o.CertFile, r.o.KeyFile, r.o.ClientCAFile} }

func (r *Reloader) stat() stamp {
	var st stamp
	for i, f := range r.files() {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			st[i].err = true
			continue
		}
		st[i].size, st[i].mtime = fi.Size(), fi.ModTime()
	}
	return st
}

// load reads the files into a config.
func (r *Reloader) load(st stamp) (*loaded, error) {
	pair, err := tls.LoadX509KeyPair(r.o.CertFile, r.o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %s, %s: %w", r.o.CertFile, r.o.KeyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: %s: %w", r.o.CertFile, err)
		}
	}
	cfg := r.base.Clone()
	cfg.Certificates = []tls.Certificate{pair}
	if r.o.ClientCAFile != "" {
		pem, err := os.ReadFile(r.o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client CA %s: no PEM certificate in it", r.o.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if len(r.o.ClientSANs) > 0 {
			sans := slices.Clone(r.o.ClientSANs)
			cfg.VerifyConnection = func(cs tls.ConnectionState) error { return checkSAN(cs, sans) }
		}
	}
	return &loaded{cfg: cfg, cert: leaf, stamp: st, loadedAt: time.Now()}, nil
}

// checkSAN accepts a verified client certificate carrying one of sans.
func checkSAN(cs tls.ConnectionState, sans []string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: no client certificate")
	}
	if HasSAN(cs.PeerCertificates[0], sans) {
		return nil
	}
	return fmt.Errorf("tls: the client certificate carries none of the allowed subject alternative names %q", sans)
}

// HasSAN reports whether c carries one of sans among its DNS names, URIs,
// IP addresses and e-mail addresses (compared exactly).
func HasSAN(c *x509.Certificate, sans []string) bool {
	for _, s := range sans {
		if slices.Contains(c.DNSNames, s) || slices.Contains(c.EmailAddresses, s) {
			return true
		}
		for _, u := range c.URIs {
			if u.String() == s {
				return true
			}
		}
		for _, ip := range c.IPAddresses {
			if ip.String() == s {
				return true
			}
		}
	}
	return false
}
