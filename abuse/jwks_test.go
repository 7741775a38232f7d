package abuse

import (
	"crypto/rsa"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/testidp"
)

func rs256Token(t *testing.T, k *rsa.PrivateKey, kid, sub string) string {
	return testidp.Sign(t, "RS256", kid, k, fmt.Sprintf(`{"sub":%q,"exp":%d}`, sub, time.Now().Add(time.Hour).Unix()))
}

// Attack: a flood of JWTs each naming a kid the JWKS does not hold. A
// gateway that fetches the set again for every unknown kid lets anyone
// make it hammer the identity provider (and wait on it); one that trusts
// a key it was not given lets the forger in.
//
// Bound: 400 tokens with fresh kids, 8 at a time, are each answered 401,
// and cost the IdP at most one fetch per jwks_min_interval (here 1h: one
// fetch for the first token); a token of the set's key is still 200.
// Then key rotation: a kid published after that is taken once the
// interval allows a fetch (a second gateway with a 300ms interval).
func TestJWKSUnknownKidFlood(t *testing.T) {
	t.Parallel()
	idp := testidp.New(t)
	k1 := idp.AddRSA(t, "k1")
	gw := func(interval string) *gatewayProc {
		return startServe(t, writeFile(t, t.TempDir(), "gateway.yaml", fmt.Sprintf(`
upstream: builtin:echo
identity:
  jwt: {alg: RS256, jwks_url: "%s", jwks_min_interval: %s}
routes:
  - path: /
`, idp.URL, interval)))
	}
	g := gw("1h")
	c := client(t)
	forged := testidp.RSAKey(t)
	var tokens [400]string
	for i := range tokens {
		tokens[i] = rs256Token(t, forged, fmt.Sprintf("fresh-%d", i), "mallory")
	}
	err := parallel(len(tokens), 8, func(i int) error {
		code, _, _, err := tryDo(c, "GET", g.url+"/", "Authorization", "Bearer "+tokens[i])
		if err == nil && code != http.StatusUnauthorized {
			err = fmt.Errorf("token with kid fresh-%d: %d, want 401", i, code)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := idp.Fetches(); n != 1 {
		t.Errorf("400 unknown kids cost %d JWKS fetches, want 1", n)
	}
	if code, _, _ := do(t, c, "GET", g.url+"/", "Authorization", "Bearer "+rs256Token(t, k1, "k1", "alice")); code != http.StatusOK {
		t.Errorf("the set's key after the flood: %d, want 200", code)
	}
	if v := scrape(t, g.admin).value(t, "sluice_gateway_unauthorized_total", `reason="unknown_kid"`); v != float64(len(tokens)) {
		t.Errorf("unknown_kid refusals %v, want %d", v, len(tokens))
	}

	// Rotation: a key published while the gateway runs is fetched on
	// its first token after the interval; the fetches stay within one
	// per interval (plus the first).
	before := idp.Fetches()
	r := gw("300ms")
	started := time.Now()
	if code, _, _ := do(t, c, "GET", r.url+"/", "Authorization", "Bearer "+rs256Token(t, k1, "k1", "alice")); code != http.StatusOK {
		t.Fatalf("k1 on the second gateway: %d", code)
	}
	k2tok := rs256Token(t, idp.AddRSA(t, "k2"), "k2", "bob")
	eventually(t, 30*time.Second, func() error {
		if code, _, _ := do(t, c, "GET", r.url+"/", "Authorization", "Bearer "+k2tok); code != http.StatusOK {
			return fmt.Errorf("rotated-in key k2: %d, want 200", code)
		}
		return nil
	})
	n, most := idp.Fetches()-before, int64(time.Since(started)/(300*time.Millisecond))+1
	if n < 2 || n > most {
		t.Errorf("rotation cost %d fetches, want 2 to %d (one, then one per 300ms at most)", n, most)
	}
}
