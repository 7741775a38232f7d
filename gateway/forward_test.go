package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// identityConfig proxies to upstream; 127.0.0.3 is a trusted proxy that
// sets X-User and X-Tier; /limited is limited per tier from the X-Tier
// header, so a client that could choose its own X-Tier could choose its
// limit.
const identityConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
identity:
  api_keys_file: keys.txt
  trusted_proxies: [127.0.0.3]
  user_header: X-User
  tier_header: X-Tier
  strip_headers: [X-Internal-Role]
%s
routes:
  - path: /limited
    rate_limits:
      - actions:
          - generic_key: {descriptor_value: limited}
          - request_headers: {header_name: X-Tier, descriptor_key: tier, skip_if_absent: true}
  - path: /
rules:
  domain: t
  descriptors:
    - key: generic_key
      value: limited
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 3}
      descriptors:
        - key: tier
          value: enterprise
          rate_limit: {unlimited: true}
`

func lastHit(t *testing.T, rec *recorder) hit {
	t.Helper()
	hits := rec.all()
	if len(hits) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return hits[len(hits)-1]
}

func TestIdentityHeadersOwnedByGateway(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	s := start(t, "", fmt.Sprintf(identityConfig, rec.url, ""))
	untrusted, proxy := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.3")
	spoof := []string{"X-User", "admin", "X-Tier", "enterprise", "X-Internal-Role", "root",
		"X-Sluice-User", "root", "X-Sluice-Tier", "enterprise", "X-Sluice-Identity-Kind", "api_key"}

	for _, tc := range []struct {
		name   string
		c      *http.Client
		hdr    []string
		want   map[string]string // header: value upstream ("" absent)
		absent []string          // spellings of stripped headers
	}{
		{"untrusted anonymous", untrusted, spoof, map[string]string{
			"X-User": "", "X-Tier": "", "X-Internal-Role": "", "X-Sluice-User": "", "X-Sluice-Tier": "", "X-Sluice-Identity-Kind": "ip"}, nil},
		{"untrusted with underscores", untrusted, []string{"X_User", "admin", "x_tier", "enterprise", "X_Sluice_User", "root"}, map[string]string{
			"X-Sluice-User": "", "X-Sluice-Identity-Kind": "ip"}, []string{"X_User", "X_tier", "X_Sluice_User"}},
		{"untrusted with API key", untrusted, append([]string{"X-API-Key", "key-alice"}, spoof...), map[string]string{
			"X-User": "", "X-Tier": "", "X-Internal-Role": "", "X-Api-Key": "key-alice",
			"X-Sluice-User": "alice", "X-Sluice-Tier": "pro", "X-Sluice-Identity-Kind": "api_key"}, nil},
		{"trusted proxy", proxy, []string{"X-User", "bob", "X-Tier", "gold", "X-Internal-Role", "ops", "X-Sluice-User", "mallory"}, map[string]string{
			"X-User": "bob", "X-Tier": "gold", "X-Internal-Role": "ops",
			"X-Sluice-User": "bob", "X-Sluice-Tier": "gold", "X-Sluice-Identity-Kind": "header"}, nil},
	} {
		if r := get(t, tc.c, s.url+"/x", tc.hdr...); r.code != 200 {
			t.Fatalf("%s: %d %s", tc.name, r.code, r.body)
		}
		h := lastHit(t, rec)
		for name, want := range tc.want {
			if got := h.header.Get(name); got != want {
				t.Errorf("%s: upstream %s = %q, want %q", tc.name, name, got, want)
			}
		}
		for _, name := range tc.absent {
			for k, v := range h.header {
				if strings.EqualFold(k, name) {
					t.Errorf("%s: upstream has %s: %q, want it stripped", tc.name, k, v)
				}
			}
		}
	}

	// The stripped X-Tier does not pick the limit either: an untrusted
	// "enterprise" client is limited like everyone (3), the trusted
	// proxy's enterprise caller is unlimited.
	if got := codes(t, untrusted, s.url+"/limited", 4, "X-Tier", "enterprise"); fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("untrusted X-Tier: enterprise on /limited: %v, want [200 200 200 429]", got)
	}
	if got := codes(t, proxy, s.url+"/limited", 4, "X-User", "carol", "X-Tier", "enterprise"); fmt.Sprint(got) != "[200 200 200 200]" {
		t.Errorf("trusted X-Tier: enterprise on /limited: %v, want [200 200 200 200]", got)
	}

	// A wrong credential is 401 on an unlimited route too: never proxied
	// as anonymous.
	before := len(rec.all())
	if r := get(t, untrusted, s.url+"/x", "X-API-Key", "key-mallory"); r.code != 401 {
		t.Errorf("wrong key on an unlimited route: %d, want 401", r.code)
	}
	if n := len(rec.all()); n != before {
		t.Errorf("the upstream received a request with a refused credential")
	}
}

func TestHideCredentialsAndForwardNames(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	extra := "  hide_credentials: true\n  forward_user_header: X-Auth-User\n  forward_tier_header: \"\"\n"
	s := start(t, "", fmt.Sprintf(identityConfig, rec.url, extra))
	c := clientFrom(t, "127.0.0.2")
	for _, hdr := range [][]string{{"X-API-Key", "key-alice"}, {"Authorization", "Bearer key-alice"}} {
		if r := get(t, c, s.url+"/x", append(hdr, "X-Sluice-User", "root", "X-Sluice-Tier", "free")...); r.code != 200 {
			t.Fatalf("%v: %d", hdr, r.code)
		}
		h := lastHit(t, rec)
		for name, want := range map[string]string{
			"Authorization": "", "X-Api-Key": "", "X-Auth-User": "alice", "X-Sluice-Identity-Kind": "api_key",
			"X-Sluice-User": "root", "X-Sluice-Tier": "free", // no longer the gateway's: passed through
		} {
			if got := h.header.Get(name); got != want {
				t.Errorf("%v: upstream %s = %q, want %q", hdr, name, got, want)
			}
		}
	}
}

// A client that is not a trusted proxy cannot lower its own cost with the
// cost header: httplimit honours it only when identity.Identity's
// TrustedPeer is set (without that, [200 200 200]: X-Cost: 1 believed).
func TestCostHeaderFromUntrustedClientIgnored(t *testing.T) {
	t.Parallel()
	cfg := `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
identity:
  trusted_proxies: [127.0.0.3]
routes:
  - path: /search
    cost: 10
    cost_header: X-Cost
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: t
  descriptors:
    - key: remote_address
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 20}
`
	s := start(t, "", cfg)
	if got := codes(t, clientFrom(t, "127.0.0.2"), s.url+"/search", 3, "X-Cost", "1"); fmt.Sprint(got) != "[200 200 429]" {
		t.Errorf("untrusted client with X-Cost: 1 on a route of cost 10, bucket of 20: %v, want [200 200 429] (charged 10 each)", got)
	}
	// From the trusted proxy the header is believed.
	if got := codes(t, clientFrom(t, "127.0.0.3"), s.url+"/search", 3, "X-Cost", "1"); fmt.Sprint(got) != "[200 200 200]" {
		t.Errorf("trusted proxy with X-Cost: 1: %v, want [200 200 200] (charged 1 each)", got)
	}
}
