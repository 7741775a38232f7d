package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Attack: an untrusted client forges the identity headers the upstream
// believes (X-User: admin, X-Tier: enterprise, also spelled X_User as a
// CGI upstream reads it the same), or the gateway's own X-Sluice-*
// headers, and lowers its own cost with the route's cost header.
//
// Bound: from a peer that is not a trusted proxy, none of the configured
// identity headers reaches the upstream in any spelling; X-Sluice-User,
// X-Sluice-Tier and X-Sluice-Identity-Kind carry the identity the gateway
// resolved and nothing the client sent; with hide_credentials the API key
// does not reach the upstream; and the cost header is ignored (route cost
// 10, X-Cost: 1, a rule of 20 a minute: 2 requests admitted, not 20).
func TestForgedIdentity(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	dir := t.TempDir()
	writeFile(t, dir, "keys.txt", keyLine("key-alice", "alice", "pro"))
	cfg := writeFile(t, dir, "gateway.yaml", fmt.Sprintf(`
upstream: %s
identity:
  api_keys_file: keys.txt
  trusted_proxies: [10.0.0.0/8]   # not the test's 127.0.0.1
  user_header: X-User
  tier_header: X-Tier
  strip_headers: [X-Internal-Role]
  hide_credentials: true
routes:
  - path: /costly
    cost: 10
    cost_header: X-Cost
    rate_limits:
      - actions: [{generic_key: {descriptor_value: costly}}]
  - path: /
rules:
  domain: abuse
  descriptors:
    - key: generic_key
      value: costly
      rate_limit: {name: costly, algorithm: fixed_window, unit: hour, requests_per_unit: 20}
`, up.srv.URL))
	g := startServe(t, cfg)
	c := client(t)

	forged := []string{
		"X-User", "admin", "X_User", "admin", "X-Tier", "enterprise", "x_tier", "enterprise",
		"X-Internal-Role", "root", "X-Sluice-User", "admin", "X-Sluice-Tier", "enterprise",
		"X-Sluice-Identity-Kind", "api_key", "X_Sluice_User", "admin", "X-Forwarded-For", "10.9.9.9",
	}
	// Anonymous, then with an API key.
	for _, tc := range []struct {
		name       string
		hdr        []string
		user, tier string
		kind       string
	}{
		{"anonymous", forged, "", "", "ip"},
		{"api key", append([]string{"X-Api-Key", "key-alice"}, forged...), "alice", "pro", "api_key"},
	} {
		before := len(up.requests())
		if code, _, body := do(t, c, "GET", g.url+"/hello", tc.hdr...); code != http.StatusOK {
			t.Fatalf("%s: GET /hello: %d %s", tc.name, code, body)
		}
		reqs := up.requests()
		if len(reqs) != before+1 {
			t.Fatalf("%s: %d requests reached the upstream, want 1", tc.name, len(reqs)-before)
		}
		h := reqs[len(reqs)-1].Header
		for name, vs := range h {
			cgi := strings.ReplaceAll(strings.ToLower(name), "_", "-")
			switch cgi {
			case "x-user", "x-tier", "x-internal-role", "x-api-key", "authorization":
				t.Errorf("%s: the upstream received %s: %q", tc.name, name, vs)
			case "x-sluice-user", "x-sluice-tier", "x-sluice-identity-kind":
				if len(vs) != 1 || name != http.CanonicalHeaderKey(name) {
					t.Errorf("%s: the upstream received %s: %q, want one value the gateway set", tc.name, name, vs)
				}
			}
		}
		for _, want := range [][2]string{{"X-Sluice-User", tc.user}, {"X-Sluice-Tier", tc.tier}, {"X-Sluice-Identity-Kind", tc.kind}} {
			if got := h.Get(want[0]); got != want[1] {
				t.Errorf("%s: the upstream received %s: %q, want %q", tc.name, want[0], got, want[1])
			}
		}
		if xff := h.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "127.0.0.1" {
			t.Errorf("%s: the upstream received X-Forwarded-For %q, want only the peer 127.0.0.1", tc.name, xff)
		}
	}

	admitted := 0
	for i := 0; i < 25; i++ {
		code, _, _ := do(t, c, "GET", g.url+"/costly", "X-Cost", "1")
		switch code {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("GET /costly with X-Cost: 1: %d", code)
		}
	}
	if admitted != 2 {
		t.Errorf("route cost 10, rule 20 an hour, X-Cost: 1 from an untrusted client: %d of 25 admitted, want 2", admitted)
	}
}

// Attack: a rule on an Envoy pseudo-header (:authority, :path, :method,
// host) limited nothing through the gateway, because Go's server keeps
// them out of the request's headers.
//
// Bound: a rule of 1 request a minute on each admits the first request
// and answers the second 429.
func TestPseudoHeaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var routes, rules strings.Builder
	headers := []string{":authority", ":path", ":method", "host"}
	for i, h := range headers {
		fmt.Fprintf(&routes, `
  - path: /h%d
    rate_limits:
      - actions: [{request_headers: {header_name: %q, descriptor_key: h%d}}]`, i, h, i)
		fmt.Fprintf(&rules, `
    - key: h%d
      rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 1}`, i)
	}
	cfg := writeFile(t, dir, "gateway.yaml", `
upstream: builtin:echo
routes:`+routes.String()+`
rules:
  domain: abuse
  descriptors:`+rules.String()+"\n")
	g := startServe(t, cfg)
	c := client(t)
	for i, h := range headers {
		url := fmt.Sprintf("%s/h%d", g.url, i)
		if code, _, body := do(t, c, "GET", url); code != http.StatusOK {
			t.Errorf("rule on %s: first request %d %s, want 200", h, code, body)
		}
		if code, _, _ := do(t, c, "GET", url); code != http.StatusTooManyRequests {
			t.Errorf("rule on %s, 1 a minute: second request %d, want 429", h, code)
		}
	}
}
