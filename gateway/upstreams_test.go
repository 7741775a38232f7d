package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

func TestParseUpstreams(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Parse("gw.yaml", []byte(`
upstream_timeout: 7s
upstream_idle_connections: 9
upstreams:
  - name: api
    url: http://127.0.0.1:1
    timeout: 3s
  - name: search
    url: https://search.internal
    idle_connections: 4
routes:
  - path: /api/
    upstream: api
  - path: /api/slow
    upstream: api
    upstream_timeout: 1m
  - path: /search
    upstream: search
`))
	must(t, err)
	if cfg.Upstream != "" || len(cfg.Upstreams) != 2 {
		t.Fatalf("Upstream %q, Upstreams %+v", cfg.Upstream, cfg.Upstreams)
	}
	if u := cfg.Upstreams[0]; u.Timeout != 3*time.Second || u.IdleConnections != 9 {
		t.Errorf("api = %+v, want its own timeout and the top level's pool", u)
	}
	if u := cfg.Upstreams[1]; u.Timeout != 7*time.Second || u.IdleConnections != 4 {
		t.Errorf("search = %+v, want the top level's timeout and its own pool", u)
	}
	for i, want := range []struct {
		upstream string
		timeout  time.Duration
	}{{"api", 3 * time.Second}, {"api", time.Minute}, {"search", 7 * time.Second}} {
		if r := cfg.Routes[i]; r.Upstream != want.upstream || r.UpstreamTimeout != want.timeout {
			t.Errorf("routes[%d]: upstream %q timeout %v, want %q %v", i, r.Upstream, r.UpstreamTimeout, want.upstream, want.timeout)
		}
	}
}

func TestParseUpstreamProblems(t *testing.T) {
	t.Parallel()
	wantProblems(t, `upstreams:
  - name: api
    url: ftp://x
  - name: api
    url: http://127.0.0.1:2
  - url: http://127.0.0.1:3
  - name: "bad name"
    url: http://127.0.0.1:4
    timeout: soon
routes:
  - path: /a
    upstream: apo
  - path: /b
`, []string{
		`gw.yaml:3: upstreams[0].url: want an http:// or https:// URL or builtin:echo, got "ftp://x"`,
		`gw.yaml:4: upstreams[1].name: upstream "api" is named twice`,
		`gw.yaml:6: upstreams[2].name: missing name`,
		`gw.yaml:7: upstreams[3].name: want a name of letters`,
		`gw.yaml:9: upstreams[3].timeout:`,
		`gw.yaml:12: routes[0].upstream: no upstream named "apo" in upstreams (did you mean "api"?)`,
		`gw.yaml:13: routes[1].upstream: the route names no upstream and there is no top-level upstream`,
	})
	wantProblems(t, `upstream: builtin:echo
routes:
  - path: /a
    upstream: api
`, []string{`gw.yaml:4: routes[0].upstream: no upstream named "api" in upstreams (there is no upstreams section)`})
}

// upstreamServer answers "name path" to every request.
func upstreamServer(t *testing.T, name string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const upstreamsConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
upstreams:
  - name: a
    url: %s
  - name: b
    url: %s
    timeout: 300ms
routes:
  - path: /a/
    upstream: a
  - path: /b/
    upstream: b
  - path: /
`

// TestRouteUpstreams: each route reaches its own upstream; one that
// cannot be reached shows on /readyz by name, the others stay ok, and
// its next answer clears it.
func TestRouteUpstreams(t *testing.T) {
	t.Parallel()
	def, a, b := upstreamServer(t, "default"), upstreamServer(t, "a"), upstreamServer(t, "b")
	s := start(t, "", fmt.Sprintf(upstreamsConfig, def.URL, a.URL, b.URL))
	c := clientFrom(t, "127.0.0.2")
	for path, want := range map[string]string{"/a/x": "a /a/x", "/b/y": "b /b/y", "/z": "default /z"} {
		if r := get(t, c, s.url+path); r.code != 200 || r.body != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, r.code, r.body, want)
		}
	}
	ready := get(t, c, s.admin+"/readyz")
	for _, want := range []string{"upstream " + def.URL + ": ok", "upstream a " + a.URL + ": ok", "upstream b " + b.URL + ": ok"} {
		if !strings.Contains(ready.body, want+"\n") {
			t.Errorf("/readyz:\n%s\nlacks %q", ready.body, want)
		}
	}
	// a goes down: its route is 502, the others are served, /readyz names a.
	a.Close()
	if r := get(t, c, s.url+"/a/x"); r.code != http.StatusBadGateway {
		t.Fatalf("a closed: %d, want 502", r.code)
	}
	if r := get(t, c, s.url+"/b/y"); r.code != 200 {
		t.Errorf("b with a down: %d", r.code)
	}
	ready = get(t, c, s.admin+"/readyz")
	if ready.code != 200 || !strings.Contains(ready.body, "upstream a "+a.URL+": unreachable since ") ||
		!strings.Contains(ready.body, "(1 failures in a row)") || !strings.Contains(ready.body, "upstream b "+b.URL+": ok") {
		t.Errorf("/readyz with a down: %d\n%s", ready.code, ready.body)
	}
}

// TestRouteUpstreamTimeout: b's own timeout bounds its route; the
// others keep the top-level one.
func TestRouteUpstreamTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	def, a := upstreamServer(t, "default"), upstreamServer(t, "a")
	s := start(t, "", fmt.Sprintf(upstreamsConfig, def.URL, a.URL, slow.URL))
	c := clientFrom(t, "127.0.0.2")
	if r := get(t, c, s.url+"/b/"); r.code != http.StatusGatewayTimeout {
		t.Errorf("b (300ms) never answering: %d, want 504", r.code)
	}
	if r := get(t, c, s.url+"/a/"); r.code != 200 {
		t.Errorf("a: %d", r.code)
	}
}

// TestRouteUpstreamsReload: a reload naming an unknown upstream is
// refused with file:line and the last good config serves; a good one
// moves a route to another upstream.
func TestRouteUpstreamsReload(t *testing.T) {
	t.Parallel()
	def, a, b := upstreamServer(t, "default"), upstreamServer(t, "a"), upstreamServer(t, "b")
	good := fmt.Sprintf(upstreamsConfig, def.URL, a.URL, b.URL)
	s := start(t, "", good)
	c := clientFrom(t, "127.0.0.2")
	bad := strings.Replace(good, "upstream: b\n", "upstream: c\n", 1)
	must(t, os.WriteFile(s.file, []byte(bad), 0o644))
	err := s.g.ReloadFile(s.file)
	if err == nil || !strings.Contains(err.Error(), `gateway.yaml:15: routes[1].upstream: no upstream named "c"`) {
		t.Errorf("bad reload = %v, want the unknown name with file:line", err)
	}
	if r := get(t, c, s.url+"/b/"); r.body != "b /b/" {
		t.Errorf("after the refused reload: %q, want b's", r.body)
	}
	moved := strings.Replace(good, "upstream: b\n", "upstream: a\n", 1)
	must(t, os.WriteFile(s.file, []byte(moved), 0o644))
	must(t, s.g.ReloadFile(s.file))
	if r := get(t, c, s.url+"/b/"); r.body != "a /b/" {
		t.Errorf("after the good reload: %q, want a's", r.body)
	}
}
