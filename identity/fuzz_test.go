package identity

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "203.0.113.9, 10.1.2.3", "")
	f.Add("10.0.0.1:80", "", `for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"`)
	f.Add("[::ffff:10.0.0.1]:1", "garbage,,", `for="\"quoted`)
	f.Add("10.0.0.1", "[2001:db8::1]", "for=unknown;by=_hidden")
	trusted := prefixes("10.0.0.0/8", "::ffff:0:0/96")
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		h := http.Header{}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		if fwd != "" {
			h.Set("Forwarded", fwd)
		}
		a := ClientIP(remote, h, trusted)
		peer := ClientIP(remote, h, nil)
		if a.IsValid() != peer.IsValid() {
			t.Fatalf("ClientIP(%q) valid = %v, peer valid = %v", remote, a.IsValid(), peer.IsValid())
		}
		if a.IsValid() && (a.Zone() != "" || a.Is4In6()) {
			t.Fatalf("ClientIP = %v: zone or mapped address left", a)
		}
		if peer.IsValid() && !isTrusted(peer, trusted) && a != peer {
			t.Fatalf("ClientIP from untrusted peer %v = %v, want the peer", peer, a)
		}
		_ = Identity{IP: a, v6bits: 64}.Key()
	})
}

func FuzzJWT(f *testing.F) {
	f.Add(sign(f, HS256, claims(), hsSecret))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")
	f.Add("a.b.c")
	f.Add(strings.Repeat(".", 5))
	v, err := newJWTVerifier(JWTConfig{Algorithm: HS256, Key: hsSecret, Now: func() time.Time { return t0 }})
	if err != nil {
		f.Fatal(err)
	}
	es, err := newJWTVerifier(JWTConfig{Algorithm: ES256, Key: &ecKey().PublicKey, Now: func() time.Time { return t0 }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		if c, err := v.verify(tok); err == nil && c.user == "" {
			t.Fatalf("verify(%q) accepted a token with no user", tok)
		}
		if _, err := es.verify(tok); err == nil {
			t.Fatalf("verify(%q) accepted a forged ES256 token", tok)
		}
	})
}

func FuzzParseKeyFile(f *testing.F) {
	f.Add([]byte("# c\n" + HashKey("x") + " alice pro\n"))
	f.Add([]byte(HashKey("x") + "\n" + HashKey("x") + " a b c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := ParseKeyFile("keys.txt", data)
		if (ks == nil) == (err == nil) {
			t.Fatalf("ParseKeyFile = %v, %v: want exactly one", ks, err)
		}
	})
}
