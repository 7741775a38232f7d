package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// A route with denial 503 and a JSON body answers a caller over its rate
// limit with them, Retry-After and RateLimit headers still sent; a route
// without one takes the top level's; the refusal is still counted.
func TestRouteDenialE2E(t *testing.T) {
	t.Parallel()
	s := start(t, "", `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
denial: {status: 403, body: "over {policy}; retry in {retry_after} s"}
routes:
  - path: /api/
    denial:
      status: 503
      body: '{"error": "slow down", "policy": "{policy}", "retry_after": {retry_after}}'
      content_type: application/json
    rate_limits:
      - actions: [{remote_address: {}}]
  - path: /
    rate_limits:
      - actions: [{remote_address: {}}]
rules:
  domain: t
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`)
	for _, tc := range []struct {
		ip, path, ct, body string
		status             int
	}{
		{"127.0.8.1", "/api/x", "application/json", `{"error": "slow down", "policy": "per-ip", "retry_after": 3600}`, 503},
		{"127.0.8.2", "/x", "text/plain; charset=utf-8", "over per-ip; retry in 3600 s", 403},
	} {
		c := clientFrom(t, tc.ip)
		if r := get(t, c, s.url+tc.path); r.code != 200 {
			t.Fatalf("%s: first request %d %s", tc.path, r.code, r.body)
		}
		r := get(t, c, s.url+tc.path)
		if r.code != tc.status || r.body != tc.body || r.h.Get("Content-Type") != tc.ct || r.h.Get("Retry-After") != "3600" ||
			r.h.Get("RateLimit") != `"per-ip";r=0;t=3600` || r.h.Get("RateLimit-Policy") == "" {
			t.Errorf("%s over the limit: %d %v %q; want %d %s %q with Retry-After 3600 and RateLimit headers", tc.path, r.code, r.h, r.body, tc.status, tc.ct, tc.body)
		}
	}
	if m := metric(t, s, `sluice_gateway_refusals_total{cause="over_limit",layer="rate_limit"}`); m != "2" {
		t.Errorf("rate limit refusals counted: %q, want 2", m)
	}
}

// A bad denial section is an error at its file:line.
func TestDenialConfigErrors(t *testing.T) {
	t.Parallel()
	src := `upstream: builtin:echo
denial: {status: 200}
routes:
  - path: /a/
    denial: {status: 429, body: "x", content_type: "json"}
  - path: /b/
    denial: {content_type: application/json}
  - path: /c/
    denial: {status: 503, bogus: 1}
  - path: /d/
    denial: {}
  - path: /e/
    denial:
      body: "` + strings.Repeat("x", 4097) + `"
  - path: /
rules:
  domain: d
  descriptors: []
`
	wantProblems(t, src, []string{
		"gw.yaml:2: denial.status: want a whole number from 400 to 599",
		`gw.yaml:5: routes[0].denial.content_type: content_type "json": want a media type`,
		"gw.yaml:7: routes[1].denial.content_type: content_type without a body",
		`gw.yaml:9: routes[2].denial: unknown field "bogus"`,
		"gw.yaml:11: routes[3].denial: want status or body",
		"gw.yaml:14: routes[4].denial.body: body is 4097 bytes: at most 4096",
	})
}

// A route's denial replaces the top level's; a route without one takes it.
func TestDenialDefaultsFromTopLevel(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Parse("gw.yaml", []byte(`upstream: builtin:echo
denial: {status: 503}
routes:
  - path: /a/
    denial: {status: 429, body: hi}
  - path: /
rules: {domain: d, descriptors: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Denial.Status() != http.StatusServiceUnavailable || cfg.Routes[0].Denial.Status() != 429 || cfg.Routes[1].Denial != cfg.Denial {
		t.Errorf("denials: top %d, routes %d and %d; want 503, 429, 503", cfg.Denial.Status(), cfg.Routes[0].Denial.Status(), cfg.Routes[1].Denial.Status())
	}
}
