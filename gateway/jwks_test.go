package gateway_test

import (
	"crypto/rsa"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testharness/testidp"
)

func TestParseJWKS(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Parse("gw.yaml", []byte(`upstream: builtin:echo
identity:
  jwt: {alg: ES256, jwks_url: "https://idp.example/jwks", jwks_refresh: 5m, jwks_min_interval: 10s}
routes: [{path: /}]
`))
	must(t, err)
	if j := cfg.Identity.JWT; j.JWKSURL != "https://idp.example/jwks" || j.JWKSRefresh != 5*time.Minute || j.JWKSMinInterval != 10*time.Second {
		t.Errorf("jwt = %+v", j)
	}
	wantProblems(t, `upstream: builtin:echo
identity:
  jwt:
    alg: RS256
    jwks_url: http://idp.example/jwks
routes: [{path: /}]
`, []string{`gw.yaml:5: identity.jwt.jwks_url: JWKS URL "http://idp.example/jwks": http:// only to a loopback address`})
	wantProblems(t, `upstream: builtin:echo
identity:
  jwt:
    alg: HS256
    key_file: k
    jwks_url: https://idp.example/jwks
routes: [{path: /}]
`, []string{`gw.yaml:6: identity.jwt.jwks_url: key_file or jwks_url, not both`})
	wantProblems(t, `upstream: builtin:echo
identity:
  jwt:
    alg: HS256
    jwks_url: https://idp.example/jwks
routes: [{path: /}]
`, []string{`gw.yaml:5: identity.jwt.jwks_url: a JWKS holds public keys: alg RS256 or ES256, not HS256`})
}

// rs256 returns a JWT for sub signed with k, with kid in its header.
func rs256(t *testing.T, k *rsa.PrivateKey, kid, sub string) string {
	return testidp.Sign(t, "RS256", kid, k, fmt.Sprintf(`{"sub":%q,"exp":%d}`, sub, time.Now().Add(time.Hour).Unix()))
}

// TestJWKSIdentity: a gateway with jwks_url takes tokens of the set's
// keys, refuses others with 401, and keeps its keys across a reload (no
// fetch, and the keys serve while the IdP is down).
func TestJWKSIdentity(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t)
	k1 := idp.AddRSA(t, "k1")
	cfg := strings.Replace(baseConfig, "  api_keys_file: keys.txt\n",
		"  api_keys_file: keys.txt\n  jwt: {alg: RS256, jwks_url: \""+idp.URL+"\", jwks_min_interval: 1h}\n", 1)
	s := start(t, "", cfg)
	c := clientFrom(t, "127.0.0.2")
	if r := get(t, c, s.url+"/", "Authorization", "Bearer "+rs256(t, k1, "k1", "alice")); r.code != 200 {
		t.Fatalf("k1 token: %d %s", r.code, r.body)
	}
	forged := testidp.RSAKey(t)
	for name, tok := range map[string]string{
		"another key, kid k1": rs256(t, forged, "k1", "mallory"),
		"unknown kid":         rs256(t, forged, "k9", "mallory"),
	} {
		if r := get(t, c, s.url+"/", "Authorization", "Bearer "+tok); r.code != 401 {
			t.Errorf("%s: %d, want 401", name, r.code)
		}
	}
	if n := idp.Fetches(); n != 1 {
		t.Errorf("%d fetches, want 1 (the unknown kid within jwks_min_interval fetches nothing)", n)
	}
	// A reload (the per-user limit changes): the same JWKS, no fetch; the
	// keys held serve with the IdP down.
	idp.Close()
	must(t, os.WriteFile(s.file, []byte(strings.Replace(cfg, "requests_per_unit: 5", "requests_per_unit: 50", 1)), 0o644))
	must(t, s.g.ReloadFile(s.file))
	if r := get(t, c, s.url+"/", "Authorization", "Bearer "+rs256(t, k1, "k1", "alice")); r.code != 200 {
		t.Errorf("k1 token after the reload, IdP down: %d %s", r.code, r.body)
	}
	if n := idp.Fetches(); n != 1 {
		t.Errorf("%d fetches after the reload, want 1", n)
	}
}

// TestJWKSUnreachableFailsClosed: with the IdP down from the start, every
// token is 401 (never anonymous), and the gateway serves anonymous
// callers.
func TestJWKSUnreachableFailsClosed(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t)
	k1 := idp.AddRSA(t, "k1")
	idp.Close()
	cfg := strings.Replace(baseConfig, "  api_keys_file: keys.txt\n",
		"  api_keys_file: keys.txt\n  jwt: {alg: RS256, jwks_url: \""+idp.URL+"\"}\n", 1)
	s := start(t, "", cfg)
	c := clientFrom(t, "127.0.0.2")
	if r := get(t, c, s.url+"/", "Authorization", "Bearer "+rs256(t, k1, "k1", "alice")); r.code != 401 {
		t.Errorf("token with the IdP down: %d, want 401", r.code)
	}
	if r := get(t, c, s.url+"/"); r.code != 200 {
		t.Errorf("anonymous with the IdP down: %d, want 200", r.code)
	}
	if m := metric(t, s, `sluice_gateway_unauthorized_total{reason="keys_unavailable"}`); m != "1" {
		t.Errorf("no keys_unavailable refusal counted")
	}
}
