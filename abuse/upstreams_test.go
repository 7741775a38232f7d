package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Attack: several services behind one gateway, each route to its own
// upstream. A request spelled to reach the other service through a route
// ("/a/../b/", "/a/%2e%2e/b/"), an outage of one service, or a bad
// deploy of the config naming a service that does not exist, must not
// carry a request to the wrong service nor take the others down.
//
// Bound: every request that reaches upstream a is one of a's route, and
// b's b's; with a down, b's route is served and /readyz names a as
// unreachable (and b as ok); a reload naming an unknown upstream is
// refused with file:line and the last good config keeps serving.
func TestRouteUpstreamsIsolated(t *testing.T) {
	t.Parallel()
	a, b := newUpstream(t), newUpstream(t)
	dir := t.TempDir()
	good := fmt.Sprintf(`
upstreams:
  - name: a
    url: %s
  - name: b
    url: %s
    timeout: 5s
routes:
  - path: /a/
    upstream: a
  - path: /b/
    upstream: b
`, a.srv.URL, b.srv.URL)
	cfg := writeFile(t, dir, "gateway.yaml", good)
	g := startServe(t, cfg, "--watch-interval", watchInterval.String())
	c := client(t)
	for _, p := range []string{"/a/1", "/b/1", "/a/../b/2", "/a/%2e%2e/b/3", "/b/..%2Fa/4", "/a/2", "/b//a/5"} {
		do(t, c, "GET", g.url+p)
	}
	check := func(u *upstream, name string) {
		t.Helper()
		for _, r := range u.requests() {
			if !strings.HasPrefix(r.Path, "/"+name+"/") {
				t.Errorf("upstream %s received %q (%s)", name, r.Path, r.RawPath)
			}
		}
	}
	check(a, "a")
	check(b, "b")
	if len(a.requests()) != 2 || len(b.requests()) != 1 {
		t.Errorf("a received %d requests, b %d; want 2 and 1", len(a.requests()), len(b.requests()))
	}

	a.srv.Close()
	if code, _, _ := do(t, c, "GET", g.url+"/a/1"); code != http.StatusBadGateway {
		t.Errorf("a down: %d, want 502", code)
	}
	if code, _, _ := do(t, c, "GET", g.url+"/b/1"); code != http.StatusOK {
		t.Errorf("b with a down: %d, want 200", code)
	}
	code, _, body := do(t, c, "GET", g.admin+"/readyz")
	if code != http.StatusOK || !strings.Contains(body, "upstream a "+a.srv.URL+": unreachable since") ||
		!strings.Contains(body, "upstream b "+b.srv.URL+": ok") {
		t.Errorf("/readyz with a down: %d\n%s", code, body)
	}

	invalid := func() float64 {
		v, _ := scrape(t, g.admin).get("sluice_gateway_config_reloads_total", `result="invalid"`)
		return v
	}
	before := invalid()
	replaceFile(t, cfg, strings.Replace(good, "upstream: b\n", "upstream: bb\n", 1))
	eventually(t, 2*watchInterval+30*time.Second, func() error {
		if n := invalid(); n <= before {
			return fmt.Errorf("invalid reloads %v, want more than %v", n, before)
		}
		return nil
	})
	if l := firstLine(g.output(), `no upstream named \"bb\"`); !strings.Contains(l, "gateway.yaml:12: routes[1].upstream") {
		t.Errorf("refusal line %q, want file:line of the route's upstream", l)
	}
	n := len(b.requests())
	if code, _, _ := do(t, c, "GET", g.url+"/b/after"); code != http.StatusOK || len(b.requests()) != n+1 {
		t.Errorf("after the refused reload: %d, b received %d more, want 200 and 1", code, len(b.requests())-n)
	}
}
