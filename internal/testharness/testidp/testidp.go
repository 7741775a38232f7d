package testidp

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// IdP is a JWKS endpoint: it answers every GET with its status and body,
// by default 200 and the set of the keys added.
type IdP struct {
	URL string

	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	status  int
	body    string // "" serves keys
	fetches atomic.Int64
}

// New starts an IdP on 127.0.0.1, closed when the test ends.
func New(tb testing.TB) *IdP {
	p := &IdP{status: http.StatusOK}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	tb.Cleanup(p.srv.Close)
	return p
}

func (p *IdP) serve(w http.ResponseWriter, r *http.Request) {
	p.fetches.Add(1)
	p.mu.Lock()
	status, body := p.status, p.body
	if body == "" {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: p.keys})
		body = string(b)
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// Fetches returns how many requests the IdP has answered.
func (p *IdP) Fetches() int64 { return p.fetches.Load() }

// Close stops the IdP: fetches then fail.
func (p *IdP) Close() { p.srv.Close() }

// Set has the IdP answer status and body (body "" serves its keys).
func (p *IdP) Set(status int, body string) {
	p.mu.Lock()
	p.status, p.body = status, body
	p.mu.Unlock()
}

// Add publishes pub (a public key) under kid for alg, for signing.
func (p *IdP) Add(kid, alg string, pub any) {
	p.mu.Lock()
	p.keys = append(p.keys, jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: alg, Use: "sig"})
	p.mu.Unlock()
}

// Remove stops publishing kid.
func (p *IdP) Remove(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := p.keys[:0]
	for _, k := range p.keys {
		if k.KeyID != kid {
			keys = append(keys, k)
		}
	}
	p.keys = keys
}

// AddRSA makes a 2048-bit RSA key, publishes it under kid for RS256, and
// returns it.
func (p *IdP) AddRSA(tb testing.TB, kid string) *rsa.PrivateKey {
	k := RSAKey(tb)
	p.Add(kid, "RS256", &k.PublicKey)
	return k
}

// RSAKey makes a 2048-bit RSA key.
func RSAKey(tb testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// KeySet returns the JSON of a set of keys: kid and public key alternating,
// each for alg ("" none) and signing.
func KeySet(tb testing.TB, alg string, kidKey ...any) string {
	var set jose.JSONWebKeySet
	for i := 0; i+1 < len(kidKey); i += 2 {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: kidKey[i+1], KeyID: kidKey[i].(string), Algorithm: alg, Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// Sign returns a compact JWS of claims (JSON) signed with key for alg,
// with kid in its header ("" none).
func Sign(tb testing.TB, alg, kid string, key any, claims string) string {
	opts := &jose.SignerOptions{}
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: key}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	obj, err := s.Sign([]byte(claims))
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
