package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/sluicehq/sluice/internal/testharness/testidp"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// jwksResolver is a resolver of RS256 tokens whose keys p serves.
func jwksResolver(t *testing.T, p *testidp.IdP, clk *clock, alg string) *Resolver {
	t.Helper()
	j, err := NewJWKS(JWKSOptions{URL: p.URL, Algorithm: alg, Refresh: time.Hour, MinInterval: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(Options{JWT: &JWTConfig{Algorithm: alg, JWKS: j, Now: func() time.Time { return t0 }}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// resolveToken resolves a bearer token: the user, or the reason it is
// refused.
func resolveToken(r *Resolver, tok string) string {
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	id, err := r.Resolve(req)
	if err != nil {
		return "refused:" + string(ReasonOf(err))
	}
	return id.User
}

func kidToken(t testing.TB, alg, kid string, key any) string {
	return signHeader(t, map[string]any{"alg": alg, "kid": kid}, claims(), key)
}

// TestJWKSRotation: keys are fetched on first use, a new kid is fetched
// (at most once a MinInterval), a key dropped from the set stops working
// at the next refresh.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	p, clk := testidp.New(t), &clock{t: t0}
	k1, k2 := rsaKey(), testidp.RSAKey(t)
	p.Set(200, testidp.KeySet(t, RS256, "k1", &k1.PublicKey))
	r := jwksResolver(t, p, clk, RS256)
	steps := []struct {
		name    string
		do      func()
		tok     string
		want    string
		fetches int64
	}{
		{"k1, first use", nil, kidToken(t, RS256, "k1", k1), "alice", 1},
		{"k1 again: cached", nil, kidToken(t, RS256, "k1", k1), "alice", 1},
		{"k2 before it is published: one fetch allowed? not yet (interval)", func() { p.Set(200, testidp.KeySet(t, RS256, "k1", &k1.PublicKey, "k2", &k2.PublicKey)) },
			kidToken(t, RS256, "k2", k2), "refused:unknown_kid", 1},
		{"k2 after MinInterval: fetched", func() { clk.add(time.Minute) }, kidToken(t, RS256, "k2", k2), "alice", 2},
		{"k1 still there", nil, kidToken(t, RS256, "k1", k1), "alice", 2},
		{"k1 dropped, refresh due", func() { p.Set(200, testidp.KeySet(t, RS256, "k2", &k2.PublicKey)); clk.add(time.Hour) },
			kidToken(t, RS256, "k1", k1), "refused:unknown_kid", 3},
		{"k2 after the refresh", nil, kidToken(t, RS256, "k2", k2), "alice", 3},
		{"k2's kid, k1's signature", nil, kidToken(t, RS256, "k2", k1), "refused:bad_signature", 3},
		{"no kid, one key: that key", nil, signHeader(t, map[string]any{"alg": RS256}, claims(), k2), "alice", 3},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := resolveToken(r, s.tok); got != s.want {
			t.Errorf("%s: %s, want %s", s.name, got, s.want)
		}
		if n := p.Fetches(); n != s.fetches {
			t.Errorf("%s: %d fetches, want %d", s.name, n, s.fetches)
		}
	}
}

// TestJWKSUnknownKidFlood: a flood of tokens with made-up kids costs the
// IdP one fetch per MinInterval, however many tokens.
func TestJWKSUnknownKidFlood(t *testing.T) {
	t.Parallel()
	p, clk := testidp.New(t), &clock{t: t0}
	p.Set(200, testidp.KeySet(t, RS256, "k1", &rsaKey().PublicKey))
	r := jwksResolver(t, p, clk, RS256)
	forged := testidp.RSAKey(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if got := resolveToken(r, kidToken(t, RS256, fmt.Sprintf("kid-%d-%d", w, i), forged)); got != "refused:unknown_kid" {
					t.Errorf("made-up kid: %s", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := p.Fetches(); n != 1 {
		t.Errorf("800 made-up kids: %d fetches, want 1", n)
	}
	clk.add(time.Minute)
	for i := range 100 {
		resolveToken(r, kidToken(t, RS256, fmt.Sprintf("later-%d", i), forged))
	}
	if n := p.Fetches(); n != 2 {
		t.Errorf("after MinInterval: %d fetches, want 2", n)
	}
}

// TestJWKSFailsClosed: a set that cannot be fetched, is too big or too
// long, or holds no usable key leaves no key (every token refused), and
// does not replace the keys held.
func TestJWKSFailsClosed(t *testing.T) {
	t.Parallel()
	k := rsaKey()
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	many := make([]any, 0, 2*(DefaultJWKSMaxKeys+1))
	for i := range DefaultJWKSMaxKeys + 1 {
		many = append(many, fmt.Sprint("k", i), &k.PublicKey)
	}
	private, _ := json.Marshal(jose.JSONWebKey{Key: k, KeyID: "k1", Algorithm: RS256})
	enc, _ := json.Marshal(jose.JSONWebKey{Key: &k.PublicKey, KeyID: "k1", Algorithm: "RSA-OAEP", Use: "enc"})
	oct, _ := json.Marshal(jose.JSONWebKey{Key: hsSecret, KeyID: "k1", Algorithm: HS256})
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"500", 500, testidp.KeySet(t, RS256, "k1", &k.PublicKey)},
		{"not JSON", 200, "<html>"},
		{"too big", 200, testidp.KeySet(t, RS256, "k1", &k.PublicKey) + strings.Repeat(" ", DefaultJWKSMaxBytes)},
		{"too many keys", 200, testidp.KeySet(t, RS256, many...)},
		{"RSA 1024", 200, testidp.KeySet(t, RS256, "k1", &small.PublicKey)},
		{"EC key for RS256", 200, testidp.KeySet(t, "", "k1", &ec.PublicKey)},
		{"private key published", 200, `{"keys":[` + string(private) + `]}`},
		{"encryption key", 200, `{"keys":[` + string(enc) + `]}`},
		{"HMAC secret as a key (alg confusion)", 200, `{"keys":[` + string(oct) + `]}`},
		{"garbage key", 200, `{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, clk := testidp.New(t), &clock{t: t0}
			p.Set(c.status, c.body)
			r := jwksResolver(t, p, clk, RS256)
			if got := resolveToken(r, kidToken(t, RS256, "k1", k)); got != "refused:keys_unavailable" {
				t.Errorf("with the bad set: %s, want refused:keys_unavailable", got)
			}
			// HS256 with the key's public bytes as the secret: refused.
			if got := resolveToken(r, kidToken(t, HS256, "k1", hsSecret)); got != "refused:wrong_algorithm" {
				t.Errorf("HS256 token: %s", got)
			}
			// A good set, then the bad one again at the refresh: the good
			// keys stay.
			p.Set(200, testidp.KeySet(t, RS256, "k1", &k.PublicKey))
			clk.add(time.Minute)
			if got := resolveToken(r, kidToken(t, RS256, "k1", k)); got != "alice" {
				t.Fatalf("with a good set: %s", got)
			}
			p.Set(c.status, c.body)
			clk.add(time.Hour)
			if got := resolveToken(r, kidToken(t, RS256, "k1", k)); got != "alice" {
				t.Errorf("bad set at the refresh: %s, want the held key to serve", got)
			}
			if n := p.Fetches(); n != 3 {
				t.Errorf("%d fetches, want 3", n)
			}
		})
	}
}

// TestJWKSForgeries: with keys from a JWKS, alg none, HS256 signed with
// the public key, a key embedded in the header, and another key's
// signature are all refused.
func TestJWKSForgeries(t *testing.T) {
	t.Parallel()
	p, clk := testidp.New(t), &clock{t: t0}
	k := rsaKey()
	p.Set(200, testidp.KeySet(t, RS256, "k1", &k.PublicKey))
	r := jwksResolver(t, p, clk, RS256)
	attacker := testidp.RSAKey(t)
	embedded, _ := json.Marshal(jose.JSONWebKey{Key: &attacker.PublicKey})
	var jwk map[string]any
	json.Unmarshal(embedded, &jwk)
	pubJSON, _ := json.Marshal(jose.JSONWebKey{Key: &k.PublicKey})
	for _, c := range []struct{ name, tok, want string }{
		{"alg none", signHeader(t, map[string]any{"alg": "none", "kid": "k1"}, claims(), nil), "refused:wrong_algorithm"},
		{"HS256 with the JWK as secret", kidToken(t, HS256, "k1", pubJSON), "refused:wrong_algorithm"},
		{"embedded jwk", signHeader(t, map[string]any{"alg": RS256, "kid": "k1", "jwk": jwk}, claims(), attacker), "refused:bad_signature"},
		{"attacker's key, known kid", kidToken(t, RS256, "k1", attacker), "refused:bad_signature"},
		{"kid path traversal", kidToken(t, RS256, "../../../../dev/null", attacker), "refused:unknown_kid"},
		{"crit header", signHeader(t, map[string]any{"alg": RS256, "kid": "k1", "crit": []string{"exp"}, "exp": 1}, claims(), k), "refused:wrong_algorithm"},
		{"expired", signHeader(t, map[string]any{"alg": RS256, "kid": "k1"}, claims("exp", t0.Add(-time.Second).Unix()), k), "refused:expired"},
		{"valid", kidToken(t, RS256, "k1", k), "alice"},
	} {
		if got := resolveToken(r, c.tok); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestCheckJWKSURL(t *testing.T) {
	t.Parallel()
	for u, ok := range map[string]bool{
		"https://idp.example/.well-known/jwks.json": true,
		"http://127.0.0.1:8080/jwks":                true,
		"http://[::1]:8080/jwks":                    true,
		"http://localhost/jwks":                     true,
		"http://idp.example/jwks":                   false,
		"http://127.0.0.1.evil.example/jwks":        false,
		"ftp://idp.example/jwks":                    false,
		"idp.example/jwks":                          false,
		"":                                          false,
	} {
		if err := CheckJWKSURL(u); (err == nil) != ok {
			t.Errorf("CheckJWKSURL(%q) = %v, want ok %v", u, err, ok)
		}
	}
	if _, err := NewJWKS(JWKSOptions{URL: "https://idp.example", Algorithm: HS256}); err == nil {
		t.Error("NewJWKS for HS256: no error (a JWKS of HMAC secrets is not fetched)")
	}
}
