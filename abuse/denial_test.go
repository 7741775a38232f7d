package abuse

import (
	"net/http"
	"strings"
	"testing"
)

// Attack: a caller over its limit tries to put its own bytes into the
// configured denial (a path, a query and headers holding the
// placeholders, quotes and markup), to forge the JSON an API client
// parses or to reflect script into an HTML page.
//
// Bound: the denial's body is the configured one with the server's
// values only (the policy's name, JSON-escaped, and the seconds of
// Retry-After): byte for byte the same whatever the request, with
// Retry-After and RateLimit still sent; a denial the gateway cannot send
// (a status outside 400-599, a body over 4 KiB) stops it at start, naming
// file:line.
func TestDenialCarriesNoClientInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := startServe(t, writeFile(t, dir, "gateway.yaml", `
upstream: builtin:echo
routes:
  - path: /
    denial:
      status: 503
      body: '{"error": "slow down", "policy": "{policy}", "retry_after": {retry_after}}'
      content_type: application/json
    rate_limits:
      - actions: [{remote_address: {}}]
rules:
  domain: abuse
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`))
	c := client(t)
	if code, _, body := do(t, c, "GET", g.url+"/"); code != http.StatusOK {
		t.Fatalf("first request: %d %s", code, body)
	}
	const want = `{"error": "slow down", "policy": "per-ip", "retry_after": 3600}`
	evil := `{policy}"},"admin":true,"x":"</script>{retry_after}`
	for _, req := range [][]string{
		{"/"},
		{"/%7Bpolicy%7D%22%3C/script%3E?policy=%7Bpolicy%7D&retry_after=0", "X-Policy", evil, "User-Agent", evil, "Cookie", "policy=" + evil},
	} {
		code, h, body := do(t, c, "GET", g.url+req[0], req[1:]...)
		if code != http.StatusServiceUnavailable || body != want || h.Get("Content-Type") != "application/json" ||
			h.Get("Retry-After") != "3600" || h.Get("RateLimit") == "" {
			t.Errorf("GET %s over the limit: %d %s %q (Retry-After %q, RateLimit %q); want 503 application/json %q with Retry-After 3600",
				req[0], code, h.Get("Content-Type"), body, h.Get("Retry-After"), h.Get("RateLimit"), want)
		}
	}

	for _, tc := range []struct{ denial, want string }{
		{"{status: 302, body: moved}", `gateway.yaml:4: routes[0].denial.status: want a whole number from 400 to 599`},
		{`{body: "` + strings.Repeat("x", 4097) + `"}`, `gateway.yaml:4: routes[0].denial.body: body is 4097 bytes: at most 4096`},
	} {
		bad := writeFile(t, t.TempDir(), "gateway.yaml", "upstream: builtin:echo\nroutes:\n  - path: /\n    denial: "+tc.denial+"\nrules: {domain: abuse, descriptors: []}\n")
		if _, err := tryServe(t, bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve with denial %.40s: %v, want it refused at start with %q", tc.denial, err, tc.want)
		}
	}
}
