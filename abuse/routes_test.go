package abuse

import (
	"fmt"
	"net/http"
	"path"
	"strings"
	"testing"
)

// routeConfig is a gateway in front of up with two routes limited to n
// requests an hour each (/x for GET, /api for every method) and an
// unlimited catch-all.
func routeConfig(t testing.TB, up *upstream, n int) string {
	dir := t.TempDir()
	return writeFile(t, dir, "gateway.yaml", fmt.Sprintf(`
upstream: %s
headers: ietf
routes:
  - path: /x
    methods: [GET]
    rate_limits:
      - actions: [{generic_key: {descriptor_value: x}}]
  - path: /api
    rate_limits:
      - actions: [{generic_key: {descriptor_value: api}}]
  - path: /
rules:
  domain: abuse
  descriptors:
    - key: generic_key
      value: x
      rate_limit: {name: x, algorithm: token_bucket, unit: hour, requests_per_unit: %[2]d}
    - key: generic_key
      value: api
      rate_limit: {name: api, algorithm: token_bucket, unit: hour, requests_per_unit: %[2]d}
`, up.srv.URL, n))
}

// Attack: spell a limited route differently, so that the gateway's route
// match misses it while the upstream (which normalizes) serves it: HEAD
// for GET, "//x", "/./x", "/y/../x", percent-encoded dots, slashes and
// letters, a trailing slash, a lower-case method, an absolute request
// target, a backslash.
//
// Bound: whatever the spelling, at most N requests of the route's paths
// (/x and its subtree) reach the upstream, and the upstream only ever
// receives clean paths (the gateway redirects or refuses the rest, and
// proxies exactly the path it matched).
func TestRouteSpellings(t *testing.T) {
	t.Parallel()
	const n = 5
	up := newUpstream(t)
	g := startServe(t, routeConfig(t, up, n))
	addr := hostPort(g.url)

	spellings := []string{
		"GET /x", "HEAD /x", "GET /x/", "GET //x", "GET /./x", "GET /y/../x", "GET /x/.",
		"GET /y/%2e%2e/x", "GET /%2E/x", "GET /y/%2E%2E/x", "GET /%78", "GET /%2Fx", "GET /y%2F..%2Fx",
		"GET /y/..%2Fx", "GET /y%5C..%5Cx", `GET /y\..\x`, "get /x", "Get /x", "GET /x?a=1", "GET /x/sub",
		"GET //x//sub", "GET http://" + addr + "/x", "GET http://" + addr + "//x",
		"HEAD /x/", "HEAD //x", "GET /x/sub/../",
	}
	answers := map[string][]int{}
	for round := 0; round < 3; round++ {
		for _, s := range spellings {
			method, target, _ := strings.Cut(s, " ")
			code := rawRequest(t, addr, method+" "+target+" HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
			answers[s] = append(answers[s], code)
		}
	}
	// A client that follows the redirects ends on the canonical path,
	// which is limited like any other request.
	c := &http.Client{}
	for _, target := range []string{"//x", "/./x", "/y/../x", "/y/%2e%2e/x"} {
		res, err := c.Get(g.url + target)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		answers["follow "+target] = append(answers["follow "+target], res.StatusCode)
	}

	got := 0
	for _, r := range up.requests() {
		if r.Path == "/x" || strings.HasPrefix(r.Path, "/x/") {
			got++
		}
		if p := strings.SplitN(r.RawPath, "?", 2)[0]; !clean(p) {
			t.Errorf("the upstream received %s %q, not a clean path", r.Method, r.RawPath)
		}
	}
	if got > n {
		t.Errorf("%d requests for /x reached the upstream, want at most %d; answers by spelling: %v", got, n, answers)
	}
	if got == 0 {
		t.Errorf("no request reached the upstream (answers %v): the test limits nothing", answers)
	}
	if code, _, _ := do(t, client(t), "GET", g.url+"/x"); code != http.StatusTooManyRequests {
		t.Errorf("GET /x after the spellings: %d, want 429", code)
	}
	t.Logf("answers by spelling: %v", answers)
}

// clean reports whether p is a path the gateway may proxy: cleaned (no
// empty, "." or ".." segments, a trailing slash allowed) and with no
// encoded separator or dot.
func clean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	lower := strings.ToLower(p)
	return c == p && !strings.Contains(lower, "%2f") && !strings.Contains(lower, "%5c") &&
		!strings.Contains(lower, "%2e") && !strings.Contains(p, `\`)
}

// Attack: a path that only starts with a limited route's path ("/apix"
// against "/api") was limited by it, and "/api/..." by prefix.
//
// Bound: routes match whole segments: "/api" and "/api/sub" share the
// route's N, "/apix" is another route (here the unlimited catch-all).
func TestRouteSegments(t *testing.T) {
	t.Parallel()
	const n = 5
	up := newUpstream(t)
	g := startServe(t, routeConfig(t, up, n))
	c := client(t)
	admitted := 0
	for i := 0; i < 2*n; i++ {
		for _, p := range []string{"/api", "/api/sub", "/api/"} {
			if code, _, _ := do(t, c, "GET", g.url+p); code == http.StatusOK {
				admitted++
			}
		}
	}
	if admitted != n {
		t.Errorf("/api, /api/ and /api/sub: %d admitted, want the route's %d", admitted, n)
	}
	for i := 0; i < 2*n; i++ {
		if code, _, _ := do(t, c, "GET", g.url+"/apix"); code != http.StatusOK {
			t.Fatalf("GET /apix #%d: %d, want 200 (it is not /api)", i+1, code)
		}
	}
}
