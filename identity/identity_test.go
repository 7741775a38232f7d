package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted := prefixes("10.0.0.0/8", "2001:db8:ffff::/48")
	tests := []struct {
		name    string
		remote  string
		headers map[string][]string
		trusted []netip.Prefix
		want    string
	}{
		{"peer, nothing trusted", "198.51.100.7:5555", nil, nil, "198.51.100.7"},
		{"spoofed XFF, nothing trusted", "198.51.100.7:5555", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, nil, "198.51.100.7"},
		{"spoofed XFF from untrusted peer", "198.51.100.7:5555", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, trusted, "198.51.100.7"},
		{"trusted proxy", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, trusted, "203.0.113.9"},
		{"trusted chain", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"203.0.113.9, 10.1.2.3"}}, trusted, "203.0.113.9"},
		{"client-supplied hop ignored", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.9, 10.1.2.3"}}, trusted, "203.0.113.9"},
		{"several header lines", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"6.6.6.6", "203.0.113.9", "10.1.2.3"}}, trusted, "203.0.113.9"},
		{"all trusted: left-most", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"10.9.9.9, 10.1.2.3"}}, trusted, "10.9.9.9"},
		{"trusted proxy, no header", "10.0.0.1:5555", nil, trusted, "10.0.0.1"},
		{"garbage hop stops at last trusted", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"203.0.113.9, garbage, 10.1.2.3"}}, trusted, "10.1.2.3"},
		{"hop with port", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"203.0.113.9:4711"}}, trusted, "203.0.113.9"},
		{"IPv6 hop in brackets", "10.0.0.1:5555", map[string][]string{"X-Forwarded-For": {"[2001:db8:1::5]:443"}}, trusted, "2001:db8:1::5"},
		{"Forwarded", "10.0.0.1:5555", map[string][]string{"Forwarded": {`for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:1::17]:4711"`}}, trusted, "2001:db8:1::17"},
		{"Forwarded, trusted last hop", "10.0.0.1:5555", map[string][]string{"Forwarded": {`for=192.0.2.60, for=10.3.3.3`}}, trusted, "192.0.2.60"},
		{"Forwarded unknown", "10.0.0.1:5555", map[string][]string{"Forwarded": {`for=unknown`}}, trusted, "10.0.0.1"},
		{"XFF wins over Forwarded", "10.0.0.1:5555", map[string][]string{"Forwarded": {`for=192.0.2.60`}, "X-Forwarded-For": {"203.0.113.9"}}, trusted, "203.0.113.9"},
		{"IPv4-mapped peer", "[::ffff:198.51.100.7]:5555", nil, nil, "198.51.100.7"},
		{"IPv6 peer with zone", "[fe80::1%eth0]:5555", nil, nil, "fe80::1"},
		{"trusted IPv6 proxy", "[2001:db8:ffff::1]:5555", map[string][]string{"X-Forwarded-For": {"2001:db8:1:2::99"}}, trusted, "2001:db8:1:2::99"},
		{"bare IP remote", "198.51.100.7", nil, nil, "198.51.100.7"},
		{"bad remote", "not an address", nil, nil, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, vs := range tt.headers {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			if got := ClientIP(tt.remote, h, tt.trusted).String(); got != tt.want {
				t.Errorf("ClientIP(%q, %v) = %s, want %s", tt.remote, tt.headers, got, tt.want)
			}
		})
	}
}

func TestIdentityKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   Identity
		want string
	}{
		{Identity{User: "42", Authenticated: true, IP: netip.MustParseAddr("192.0.2.1")}, "user:42"},
		{Identity{IP: netip.MustParseAddr("192.0.2.1")}, "ip:192.0.2.1"},
		{Identity{IP: netip.MustParseAddr("2001:db8:1:2:3:4:5:6")}, "ip:2001:db8:1:2:3:4:5:6"},
		{Identity{IP: netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), v6bits: 64}, "ip:2001:db8:1:2::/64"},
		{Identity{IP: netip.MustParseAddr("192.0.2.1"), v6bits: 64}, "ip:192.0.2.1"},
		{Identity{}, "ip:unknown"},
	}
	for _, tt := range tests {
		if got := tt.id.Key(); got != tt.want {
			t.Errorf("%+v.Key() = %q, want %q", tt.id, got, tt.want)
		}
	}
}

// Test keys, generated once: RSA generation is slow.
var (
	rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
	ecKey = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	hsSecret = []byte("0123456789abcdef0123456789abcdef-test-secret")
)

// sign builds a JWT with header alg and claims, signed with key (nil: no
// signature).
func sign(t testing.TB, alg string, claims map[string]any, key any) string {
	t.Helper()
	return signHeader(t, map[string]any{"alg": alg, "typ": "JWT"}, claims, key)
}

// signHeader is sign with the header hdr.
func signHeader(t testing.TB, header map[string]any, claims map[string]any, key any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	hdr, _ := json.Marshal(header)
	pl, _ := json.Marshal(claims)
	signed := enc.EncodeToString(hdr) + "." + enc.EncodeToString(pl)
	var sig []byte
	switch k := key.(type) {
	case []byte:
		m := hmac.New(sha256.New, k)
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	case *rsa.PrivateKey:
		d := sha256.Sum256([]byte(signed))
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:]); err != nil {
			t.Fatal(err)
		}
	case *ecdsa.PrivateKey:
		d := sha256.Sum256([]byte(signed))
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	}
	return signed + "." + enc.EncodeToString(sig)
}

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func claims(kv ...any) map[string]any {
	c := map[string]any{"sub": "alice", "exp": t0.Add(time.Hour).Unix()}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
			continue
		}
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

func TestJWT(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return t0 }
	hs := &JWTConfig{Algorithm: HS256, Key: hsSecret, Now: now, TierClaim: "plan"}
	rs := &JWTConfig{Algorithm: RS256, Key: &rsaKey().PublicKey, Now: now}
	es := &JWTConfig{Algorithm: ES256, Key: &ecKey().PublicKey, Now: now, UserClaim: "uid", Issuer: "https://issuer.example", Audience: "api"}
	lee := &JWTConfig{Algorithm: HS256, Key: hsSecret, Now: now, Leeway: time.Minute}
	otherSecret := []byte("another-secret-another-secret-another")
	rsaPubDER := func() []byte {
		// The bytes of the RSA public key as an HMAC secret: the classic
		// algorithm-confusion attack.
		b, _ := json.Marshal(rsaKey().PublicKey.N)
		return b
	}()
	tests := []struct {
		name     string
		cfg      *JWTConfig
		token    func(t testing.TB) string
		wantUser string // "" means unauthorized
		wantTier string
	}{
		{"HS256 valid", hs, func(t testing.TB) string { return sign(t, HS256, claims("plan", "pro"), hsSecret) }, "alice", "pro"},
		{"HS256 numeric sub", hs, func(t testing.TB) string { return sign(t, HS256, claims("sub", 42), hsSecret) }, "42", ""},
		{"HS256 wrong secret", hs, func(t testing.TB) string { return sign(t, HS256, claims(), otherSecret) }, "", ""},
		{"expired", hs, func(t testing.TB) string { return sign(t, HS256, claims("exp", t0.Add(-time.Second).Unix()), hsSecret) }, "", ""},
		{"expires now", hs, func(t testing.TB) string { return sign(t, HS256, claims("exp", t0.Unix()), hsSecret) }, "", ""},
		{"expired within leeway", lee, func(t testing.TB) string {
			return sign(t, HS256, claims("exp", t0.Add(-30*time.Second).Unix()), hsSecret)
		}, "alice", ""},
		{"not yet valid", hs, func(t testing.TB) string { return sign(t, HS256, claims("nbf", t0.Add(time.Minute).Unix()), hsSecret) }, "", ""},
		{"nbf within leeway", lee, func(t testing.TB) string {
			return sign(t, HS256, claims("nbf", t0.Add(30*time.Second).Unix()), hsSecret)
		}, "alice", ""},
		{"no exp", hs, func(t testing.TB) string { return sign(t, HS256, claims("exp", nil), hsSecret) }, "", ""},
		{"exp not a number", hs, func(t testing.TB) string { return sign(t, HS256, claims("exp", "tomorrow"), hsSecret) }, "", ""},
		{"no sub", hs, func(t testing.TB) string { return sign(t, HS256, claims("sub", nil), hsSecret) }, "", ""},
		{"alg none", hs, func(t testing.TB) string { return sign(t, "none", claims(), nil) }, "", ""},
		{"alg none, no signature part", hs, func(t testing.TB) string { return strings.TrimSuffix(sign(t, "none", claims(), nil), ".") }, "", ""},
		{"RS256 valid", rs, func(t testing.TB) string { return sign(t, RS256, claims(), rsaKey()) }, "alice", ""},
		{"RS256 tampered payload", rs, func(t testing.TB) string {
			tok := sign(t, RS256, claims(), rsaKey())
			parts := strings.Split(tok, ".")
			parts[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","exp":9999999999}`))
			return strings.Join(parts, ".")
		}, "", ""},
		{"HS256 token against RS256 key (alg confusion)", rs, func(t testing.TB) string { return sign(t, HS256, claims(), rsaPubDER) }, "", ""},
		{"ES256 token against RS256 config", rs, func(t testing.TB) string { return sign(t, ES256, claims(), ecKey()) }, "", ""},
		{"ES256 valid", es, func(t testing.TB) string {
			return sign(t, ES256, claims("sub", nil, "uid", "u-7", "iss", "https://issuer.example", "aud", []string{"other", "api"}), ecKey())
		}, "u-7", ""},
		{"ES256 wrong issuer", es, func(t testing.TB) string {
			return sign(t, ES256, claims("uid", "u-7", "iss", "https://evil.example", "aud", "api"), ecKey())
		}, "", ""},
		{"ES256 wrong audience", es, func(t testing.TB) string {
			return sign(t, ES256, claims("uid", "u-7", "iss", "https://issuer.example", "aud", "web"), ecKey())
		}, "", ""},
		{"malformed", hs, func(t testing.TB) string { return "a.b" }, "", ""},
		{"padding rejected", hs, func(t testing.TB) string { return sign(t, HS256, claims(), hsSecret) + "=" }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := NewResolver(Options{JWT: tt.cfg})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("Authorization", "Bearer "+tt.token(t))
			id, err := r.Resolve(req)
			if tt.wantUser == "" {
				if !errors.Is(err, ErrUnauthorized) {
					t.Fatalf("Resolve = %+v, %v, want ErrUnauthorized", id, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve = %v, want user %s", err, tt.wantUser)
			}
			if id.User != tt.wantUser || id.Tier != tt.wantTier || !id.Authenticated || id.Method != "jwt" {
				t.Errorf("Resolve = %+v, want user %q tier %q authenticated by jwt", id, tt.wantUser, tt.wantTier)
			}
		})
	}
}

func TestNewResolverRejects(t *testing.T) {
	t.Parallel()
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	tests := []struct {
		name string
		opts Options
	}{
		{"short HS256 secret", Options{JWT: &JWTConfig{Algorithm: HS256, Key: []byte("short")}}},
		{"RS256 with a secret", Options{JWT: &JWTConfig{Algorithm: RS256, Key: hsSecret}}},
		{"small RSA key", Options{JWT: &JWTConfig{Algorithm: RS256, Key: &small.PublicKey}}},
		{"ES256 on P-384", Options{JWT: &JWTConfig{Algorithm: ES256, Key: &p384.PublicKey}}},
		{"alg none", Options{JWT: &JWTConfig{Algorithm: "none"}}},
		{"negative leeway", Options{JWT: &JWTConfig{Algorithm: HS256, Key: hsSecret, Leeway: -time.Second}}},
		{"ipv6 prefix too long", Options{IPv6Prefix: 129}},
		{"user header, nothing trusted", Options{UserHeader: "X-User"}},
	}
	for _, tt := range tests {
		if _, err := NewResolver(tt.opts); err == nil {
			t.Errorf("NewResolver(%s) = nil error, want one", tt.name)
		}
	}
}

func testKeys(t testing.TB) *KeyStore {
	t.Helper()
	ks, err := ParseKeyFile("keys.txt", []byte(
		"# hash user tier\n"+
			HashKey("sk_alice")+" alice pro\n"+
			HashKey("sk_bob")+"\tbob\n"))
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestResolve(t *testing.T) {
	t.Parallel()
	r, err := NewResolver(Options{
		TrustedProxies: prefixes("10.0.0.0/8"),
		IPv6Prefix:     64,
		APIKeys:        testKeys(t),
		JWT:            &JWTConfig{Algorithm: HS256, Key: hsSecret, Now: func() time.Time { return t0 }},
		UserHeader:     "X-Authenticated-User",
		TierHeader:     "X-Authenticated-Tier",
	})
	if err != nil {
		t.Fatal(err)
	}
	jwtAlice := sign(t, HS256, claims(), hsSecret)
	tests := []struct {
		name    string
		remote  string
		headers map[string]string
		wantKey string // "" means ErrUnauthorized
		tier    string
	}{
		{"anonymous", "198.51.100.7:1", nil, "ip:198.51.100.7", ""},
		{"anonymous IPv6 per /64", "[2001:db8:1:2::7]:1", nil, "ip:2001:db8:1:2::/64", ""},
		{"bearer API key", "198.51.100.7:1", map[string]string{"Authorization": "Bearer sk_alice"}, "user:alice", "pro"},
		{"X-API-Key", "198.51.100.8:1", map[string]string{"X-API-Key": "sk_bob"}, "user:bob", ""},
		{"lower-case bearer", "198.51.100.7:1", map[string]string{"Authorization": "bearer sk_alice"}, "user:alice", "pro"},
		{"unknown API key", "198.51.100.7:1", map[string]string{"X-API-Key": "sk_mallory"}, "", ""},
		{"unknown bearer key", "198.51.100.7:1", map[string]string{"Authorization": "Bearer sk_mallory"}, "", ""},
		{"basic auth", "198.51.100.7:1", map[string]string{"Authorization": "Basic YTpi"}, "", ""},
		{"empty bearer", "198.51.100.7:1", map[string]string{"Authorization": "Bearer "}, "", ""},
		{"jwt", "198.51.100.7:1", map[string]string{"Authorization": "Bearer " + jwtAlice}, "user:alice", ""},
		{"jwt and same user's key", "198.51.100.7:1", map[string]string{"Authorization": "Bearer " + jwtAlice, "X-API-Key": "sk_alice"}, "user:alice", ""},
		{"jwt and another user's key", "198.51.100.7:1", map[string]string{"Authorization": "Bearer " + jwtAlice, "X-API-Key": "sk_bob"}, "", ""},
		{"good jwt, bad key", "198.51.100.7:1", map[string]string{"Authorization": "Bearer " + jwtAlice, "X-API-Key": "nope"}, "", ""},
		{"user header from trusted proxy", "10.0.0.1:1", map[string]string{"X-Authenticated-User": "carol", "X-Authenticated-Tier": "free", "X-Forwarded-For": "203.0.113.5"}, "user:carol", "free"},
		{"user header from untrusted peer ignored", "198.51.100.7:1", map[string]string{"X-Authenticated-User": "carol"}, "ip:198.51.100.7", ""},
		{"spoofed XFF from untrusted peer ignored", "198.51.100.7:1", map[string]string{"X-Forwarded-For": "1.2.3.4"}, "ip:198.51.100.7", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tt.remote
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			id, err := r.Resolve(req)
			if tt.wantKey == "" {
				if !errors.Is(err, ErrUnauthorized) {
					t.Fatalf("Resolve = %+v, %v, want ErrUnauthorized", id, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve = %v, want %s", err, tt.wantKey)
			}
			if got := id.Key(); got != tt.wantKey || id.Tier != tt.tier {
				t.Errorf("Resolve().Key(), Tier = %q, %q, want %q, %q", got, id.Tier, tt.wantKey, tt.tier)
			}
		})
	}
}

// One API key used from three client addresses is one identity: the
// user's requests are pooled across devices (the 429 integration guide's model).
func TestResolveOneKeyThreeIPs(t *testing.T) {
	t.Parallel()
	r, err := NewResolver(Options{APIKeys: testKeys(t)})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, remote := range []string{"192.0.2.1:1000", "198.51.100.2:2000", "[2001:db8::3]:3000"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-API-Key", "sk_alice")
		id, err := r.Resolve(req)
		if err != nil {
			t.Fatalf("Resolve from %s = %v", remote, err)
		}
		keys[id.Key()] = true
	}
	if len(keys) != 1 || !keys["user:alice"] {
		t.Errorf("keys from three IPs = %v, want only user:alice", keys)
	}
}

func TestParseKeyFile(t *testing.T) {
	t.Parallel()
	h := HashKey("k")
	data := "# comment\n\n" +
		h + " alice pro\n" +
		"zz" + h[2:] + " bob\n" +
		"abc bob\n" +
		h + " carol\n" +
		h + "\n" +
		h[:62] + "Ab" + " dave free extra\n"
	_, err := ParseKeyFile("keys.txt", []byte(data))
	want := []string{
		"keys.txt:4: key hash is not hex",
		"keys.txt:5: key hash is 3 characters, want the 64 hex digits of a SHA-256",
		"keys.txt:6: key hash listed twice (first at line 3)",
		`keys.txt:7: want "sha256-hex user [tier]", got 1 fields`,
		`keys.txt:8: want "sha256-hex user [tier]", got 4 fields`,
	}
	if err == nil {
		t.Fatal("ParseKeyFile = nil error")
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("ParseKeyFile error:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	ks := testKeys(t)
	if k, ok := ks.Lookup("sk_alice"); !ok || k.User != "alice" || k.Tier != "pro" {
		t.Errorf("Lookup(sk_alice) = %+v, %v", k, ok)
	}
	if _, ok := ks.Lookup(HashKey("sk_alice")); ok {
		t.Errorf("Lookup(hash) found a key: the hash itself must not authenticate")
	}
}

func TestLoadKeyFile(t *testing.T) {
	t.Parallel()
	ks, err := LoadKeyFile("testdata/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := ks.Lookup("demo-key-123"); !ok || k.User != "demo" {
		t.Errorf("Lookup(demo-key-123) = %+v, %v, want user demo", k, ok)
	}
}
