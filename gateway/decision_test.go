package gateway_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/rules"
)

// decisionConfig is a whole-listener decision endpoint for the proxy
// named: the proxy is 127.0.0.2; anonymous callers get 2 requests per IP
// on /api/expensive, users 3; /api/ is unlimited; nothing else is routed.
func decisionConfig(proxy, path string) string {
	dec := "decision: {proxy: " + proxy + "}"
	up := ""
	if path != "" {
		dec = "decision: {proxy: " + proxy + ", path: " + path + "}"
		up = "upstream: builtin:echo\n"
	}
	return `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
` + up + dec + `
identity:
  api_keys_file: keys.txt
  trusted_proxies: [127.0.0.2]
routes:
  - path: /api/
  - path: /api/expensive
    rate_limits:
      - actions:
          - identity: {}
rules:
  domain: t
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 2}
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: hour, requests_per_unit: 3}
`
}

// ask sends a decision request as the proxy would, from c, for the
// original method, target and client (X-Forwarded-For), with hdr.
func ask(t *testing.T, c *http.Client, s *server, proxy, method, target, client string, hdr ...string) resp {
	t.Helper()
	h := []string{"X-Forwarded-For", client}
	url := s.url + "/auth"
	switch proxy {
	case "nginx":
		h = append(h, "X-Original-Method", method, "X-Original-URI", target)
	case "ingress-nginx":
		h = append(h, "X-Original-Method", method, "X-Original-URL", "https://api.example"+target)
	case "forwarded":
		h = append(h, "X-Forwarded-Method", method, "X-Forwarded-Uri", target, "X-Forwarded-Host", "api.example")
	case "envoy":
		return do(t, c, method, s.url+target, append(h, hdr...)...)
	}
	return get(t, c, url, append(h, hdr...)...)
}

// TestDecisionEachProxy: each proxy's spelling of the original request is
// decided as the proxied request would be: admitted with 200, the
// RateLimit headers and the identity headers; over the limit refused in
// the form the proxy passes on (429 and problem+json, or nginx's 403 with
// X-Sluice-Status: 429), with Retry-After and the RateLimit headers.
func TestDecisionEachProxy(t *testing.T) {
	t.Parallel()
	for _, proxy := range []string{"nginx", "ingress-nginx", "forwarded", "envoy"} {
		t.Run(proxy, func(t *testing.T) {
			t.Parallel()
			s := start(t, "", decisionConfig(proxy, ""))
			c := clientFrom(t, "127.0.0.2")
			var got []int
			var last resp
			for range 3 {
				last = ask(t, c, s, proxy, "GET", "/api/expensive?q=1", "198.51.100.7")
				got = append(got, last.code)
			}
			deny := http.StatusTooManyRequests
			if strings.Contains(proxy, "nginx") {
				deny = http.StatusForbidden
			}
			if fmt.Sprint(got) != fmt.Sprint([]int{200, 200, deny}) {
				t.Fatalf("three decisions for one client: %v, want [200 200 %d]", got, deny)
			}
			if deny == http.StatusForbidden && last.h.Get("X-Sluice-Status") != "429" {
				t.Errorf("nginx refusal: X-Sluice-Status %q, want 429", last.h.Get("X-Sluice-Status"))
			}
			if last.h.Get("Retry-After") == "" || last.h.Get("RateLimit") == "" || last.h.Get("RateLimit-Policy") == "" {
				t.Errorf("refusal headers: %v, want Retry-After, RateLimit and RateLimit-Policy", last.h)
			}
			if ct := last.h.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("refusal Content-Type %q, want application/problem+json", ct)
			}
			// Another client has its own budget; a user is identified by
			// its key and the upstream is told who it is.
			ok := ask(t, c, s, proxy, "GET", "/api/expensive", "198.51.100.8", "X-API-Key", "key-alice")
			if ok.code != 200 || ok.h.Get("X-Sluice-User") != "alice" || ok.h.Get("X-Sluice-Tier") != "pro" ||
				ok.h.Get("X-Sluice-Identity-Kind") != "api_key" || ok.h.Get("RateLimit") == "" {
				t.Errorf("alice's decision: %d %v, want 200 with X-Sluice-User alice, tier pro, kind api_key and RateLimit", ok.code, ok.h)
			}
			if anon := ask(t, c, s, proxy, "GET", "/api/cheap", "198.51.100.7"); anon.code != 200 || anon.h.Get("X-Sluice-Identity-Kind") != "ip" || anon.h["X-Sluice-User"] == nil || anon.h.Get("X-Sluice-User") != "" {
				t.Errorf("unlimited route for a spent client: %d %v, want 200, kind ip, an empty user (to replace a client's own)", anon.code, anon.h)
			}
			if bad := ask(t, c, s, proxy, "GET", "/api/cheap", "198.51.100.7", "X-API-Key", "nope"); bad.code != http.StatusUnauthorized {
				t.Errorf("a bad key: %d, want 401 (every proxy passes it on)", bad.code)
			}
		})
	}
}

// TestDecisionPathSpellings: the original path is cleaned and matched as a
// proxied one, so no spelling reaches another route or a fresh budget.
func TestDecisionPathSpellings(t *testing.T) {
	t.Parallel()
	s := start(t, "", decisionConfig("forwarded", ""))
	c := clientFrom(t, "127.0.0.2")
	spellings := []string{"/api/expensive", "/api//expensive", "/api/./expensive", "/api/x/../expensive",
		"/api/%65xpensive", "/api/%2e/expensive", "//api/expensive"}
	var got []int
	for _, p := range spellings {
		got = append(got, ask(t, c, s, "forwarded", "get", p, "198.51.100.9").code)
	}
	if fmt.Sprint(got) != "[200 200 429 429 429 429 429]" {
		t.Errorf("spellings of /api/expensive for one client: %v, want one budget of 2 [200 200 429 429 429 429 429]", got)
	}
	for _, p := range []string{"/api/%2fexpensive", "/api\\expensive", "/api/%C0%AFexpensive", "api/expensive", "*", "http://x/api/expensive"} {
		if r := ask(t, c, s, "forwarded", "GET", p, "198.51.100.10"); r.code != http.StatusBadRequest {
			t.Errorf("X-Forwarded-Uri %q: %d, want 400 (refused as a proxied request is)", p, r.code)
		}
	}
	if r := ask(t, c, s, "forwarded", "GET", "/other", "198.51.100.10"); r.code != http.StatusNotFound {
		t.Errorf("no route: %d, want 404", r.code)
	}
}

// TestDecisionTrust: forwarding headers are believed from trusted proxies
// only; from anyone else the decision endpoint answers 403 and charges
// nothing; a proxy that leaves a header out, or lets a client's second
// copy through, is answered 400.
func TestDecisionTrust(t *testing.T) {
	t.Parallel()
	s := start(t, "", decisionConfig("forwarded", ""))
	evil := clientFrom(t, "127.0.0.3")
	for range 3 {
		if r := ask(t, evil, s, "forwarded", "GET", "/api/expensive", "198.51.100.11"); r.code != http.StatusForbidden {
			t.Fatalf("an untrusted peer's decision request: %d, want 403", r.code)
		}
	}
	c := clientFrom(t, "127.0.0.2")
	if got := codes(t, c, s.url+"/auth", 1, "X-Forwarded-For", "198.51.100.11", "X-Forwarded-Method", "GET", "X-Forwarded-Host", "a"); got[0] != http.StatusBadRequest {
		t.Errorf("no X-Forwarded-Uri: %v, want 400", got)
	}
	req, _ := http.NewRequest("GET", s.url+"/auth", nil)
	req.Header["X-Forwarded-Uri"] = []string{"/api/cheap", "/api/expensive"}
	req.Header.Set("X-Forwarded-Method", "GET")
	req.Header.Set("X-Forwarded-Host", "a")
	res, err := c.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("two X-Forwarded-Uri: %d, want 400", res.StatusCode)
	}
	// The untrusted peer charged nothing: the client still has its 2.
	if got := []int{ask(t, c, s, "forwarded", "GET", "/api/expensive", "198.51.100.11").code,
		ask(t, c, s, "forwarded", "GET", "/api/expensive", "198.51.100.11").code}; fmt.Sprint(got) != "[200 200]" {
		t.Errorf("after an untrusted peer's requests: %v, want [200 200]", got)
	}
}

// TestDecisionPath: with decision.path, that path decides and every other
// request is proxied, both through the same routes and budgets.
func TestDecisionPath(t *testing.T) {
	t.Parallel()
	for _, proxy := range []string{"forwarded", "envoy"} {
		t.Run(proxy, func(t *testing.T) {
			t.Parallel()
			s := start(t, "", decisionConfig(proxy, "/_sluice/decide"))
			c := clientFrom(t, "127.0.0.2")
			target := "/api/expensive"
			var r resp
			if proxy == "envoy" {
				r = ask(t, c, s, proxy, "GET", "/_sluice/decide"+target, "198.51.100.12")
			} else {
				r = get(t, c, s.url+"/_sluice/decide", "X-Forwarded-For", "198.51.100.12", "X-Forwarded-Method", "GET",
					"X-Forwarded-Uri", target, "X-Forwarded-Host", "api.example")
			}
			if r.code != 200 || r.body != "" {
				t.Fatalf("decision: %d %q, want 200 and no body", r.code, r.body)
			}
			// The proxied request of the same client spends the same budget.
			if got := codes(t, c, s.url+target, 2, "X-Forwarded-For", "198.51.100.12"); fmt.Sprint(got) != "[200 429]" {
				t.Errorf("proxied after one decision: %v, want [200 429]", got)
			}
		})
	}
}

// TestDecisionConfigErrors: what a decision endpoint cannot do is refused,
// with the line that says it.
func TestDecisionConfigErrors(t *testing.T) {
	t.Parallel()
	base := decisionConfig("nginx", "")
	cases := []struct {
		name, cfg, want string
		line            int
	}{
		{"no trusted proxies", strings.Replace(base, "  trusted_proxies: [127.0.0.2]\n", "", 1), "identity.trusted_proxies", 4},
		{"unknown proxy", strings.Replace(base, "proxy: nginx", "proxy: haproxy", 1), "want nginx, ingress-nginx", 4},
		{"missing proxy", strings.Replace(base, "{proxy: nginx}", "{path: /x}", 1) + "upstream: builtin:echo\n", "missing proxy", 4},
		{"bad path", strings.Replace(base, "{proxy: nginx}", "{proxy: nginx, path: x}", 1) + "upstream: builtin:echo\n", "clean absolute path", 4},
		{"upstream", base + "upstream: builtin:echo\n", "nothing is proxied", 21},
		{"in_flight", base + "in_flight: {max: 2}\n", "in flight", 21},
		{"refund_on", strings.Replace(base, "  - path: /api/\n", "  - path: /api/\n    refund_on: [500]\n", 1), "nothing can be refunded", 10},
		{"rate_limit_endpoint", base + "rate_limit_endpoint: /rate_limit\n", "give decision a path", 21},
	}
	for _, tc := range cases {
		_, err := gateway.Parse("gw.yaml", []byte(tc.cfg))
		var errs *rules.Errors
		if !errors.As(err, &errs) {
			t.Errorf("%s: Parse = %v, want a problem %q", tc.name, err, tc.want)
			continue
		}
		found := false
		for _, p := range *errs {
			if strings.Contains(p.Msg, tc.want) && p.Line == tc.line {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: Parse = %v, want %q at gw.yaml:%d", tc.name, err, tc.want, tc.line)
		}
	}
	if _, err := gateway.Parse("gw.yaml", []byte(base)); err != nil {
		t.Errorf("a whole-listener decision endpoint without upstream: %v", err)
	}
}

// TestDecisionExamples: examples/proxies/sluice.yaml is valid for every
// proxy it names, and the proxies' YAML configs beside it parse.
func TestDecisionExamples(t *testing.T) {
	t.Parallel()
	for _, proxy := range []string{"nginx", "ingress-nginx", "forwarded", "traefik", "caddy", "envoy"} {
		data := exampleFile(t, "sluice.yaml", "proxy: nginx", "proxy: "+proxy)
		if err := gateway.Check("../examples/proxies/sluice.yaml", []byte(data)); err != nil {
			t.Errorf("examples/proxies/sluice.yaml with proxy: %s: %v", proxy, err)
		}
	}
	for _, f := range []string{"traefik.yaml", "traefik-dynamic.yaml", "envoy.yaml", "ingress-nginx.yaml"} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(exampleFile(t, f)), &v); err != nil || len(v) == 0 {
			t.Errorf("examples/proxies/%s: %v (%d keys)", f, err, len(v))
		}
	}
}
