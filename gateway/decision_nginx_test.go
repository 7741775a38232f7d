package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/nginxtest"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// identitySeen is an upstream that records who each request was from, as
// the proxy in front told it.
type identitySeen struct {
	mu   sync.Mutex
	seen []string // "kind user tier"
	url  string
}

func newIdentitySeen(t *testing.T) *identitySeen {
	u := &identitySeen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, strings.TrimSpace(r.Header.Get("X-Sluice-Identity-Kind")+" "+r.Header.Get("X-Sluice-User")+" "+r.Header.Get("X-Sluice-Tier")))
		u.mu.Unlock()
		w.Write([]byte("ok\n"))
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *identitySeen) all() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// exampleFile reads a file of examples/proxies and applies the
// replacements (old, new, ...), each of which must apply.
func exampleFile(t *testing.T, name string, repl ...string) string {
	t.Helper()
	b, err := os.ReadFile("../examples/proxies/" + name)
	must(t, err)
	s := string(b)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("examples/proxies/%s has no %q", name, repl[i])
		}
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	return s
}

// TestDecisionNginx: two real nginx, each with the example config
// (examples/proxies/nginx.conf) in front of one upstream, each asking its
// own sluice (examples/proxies/sluice.yaml), both sluices on one real
// Redis. A client spends one budget through either nginx and then gets
// 429 with Retry-After, the RateLimit headers and problem+json; the
// upstream sees the identity sluice resolved and never the client's own
// X-Sluice-User.
func TestDecisionNginx(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts nginx and redis-server")
	}
	nginxtest.Binary(t)
	rs := redistest.Start(t)
	up := newIdentitySeen(t)
	var fronts []string
	for range 2 {
		cfg := exampleFile(t, "sluice.yaml", "127.0.0.1:8181", "127.0.0.1:0", "127.0.0.1:9191", "127.0.0.1:0",
			"store: memory", "store: "+rs.URL()+"?timeout=5s", "../keys.txt", "keys.txt")
		s := start(t, "", cfg)
		addr := nginxtest.FreeAddr(t)
		conf := exampleFile(t, "nginx.conf", "127.0.0.1:3000", strings.TrimPrefix(up.url, "http://"),
			"127.0.0.1:8181", strings.TrimPrefix(s.url, "http://"), "listen 8000;", "listen "+addr+";")
		nginxtest.Start(t, addr, conf)
		fronts = append(fronts, "http://"+addr)
	}
	c := clientFrom(t, "127.0.0.3")
	var got []int
	var last resp
	for i := range 6 {
		last = get(t, c, fronts[i%2]+"/api/items?page=2", "X-Sluice-User", "mallory", "X-Forwarded-For", "203.0.113.1")
		got = append(got, last.code)
		if i == 0 && (last.h.Get("RateLimit") == "" || last.h.Get("RateLimit-Policy") == "") {
			t.Errorf("an admitted response through nginx: headers %v, want RateLimit and RateLimit-Policy", last.h)
		}
	}
	if fmt.Sprint(got) != "[200 200 200 200 200 429]" {
		t.Fatalf("one client through two nginx on one Redis: %v, want one burst of 5 [200 200 200 200 200 429]", got)
	}
	if last.h.Get("Retry-After") == "" || last.h.Get("RateLimit") == "" || last.h.Get("RateLimit-Policy") == "" ||
		last.h.Get("Content-Type") != "application/problem+json" || !strings.Contains(last.body, `"status":429`) {
		t.Errorf("the 429 through nginx: %v %q, want Retry-After, RateLimit, RateLimit-Policy and problem+json", last.h, last.body)
	}
	// Another spelling of the same path spends the same budget.
	if r := get(t, c, fronts[0]+"/api//items"); r.code != http.StatusTooManyRequests {
		t.Errorf("/api//items after the budget is spent: %d, want 429", r.code)
	}
	for i, s := range up.all() {
		if s != "ip" {
			t.Errorf("upstream request %d came as %q, want ip (anonymous, the client's X-Sluice-User dropped)", i, s)
		}
	}
	// A user is identified by its key, and the upstream learns who.
	alice := clientFrom(t, "127.0.0.4")
	if r := get(t, alice, fronts[1]+"/api/items", "X-API-Key", "key-alice"); r.code != 200 {
		t.Fatalf("alice through nginx: %d %s, want 200", r.code, r.body)
	}
	if all := up.all(); all[len(all)-1] != "api_key alice pro" {
		t.Errorf("the upstream saw alice as %q, want \"api_key alice pro\"", all[len(all)-1])
	}
	if r := get(t, alice, fronts[0]+"/api/items", "X-API-Key", "wrong"); r.code != http.StatusUnauthorized {
		t.Errorf("a wrong key through nginx: %d, want 401", r.code)
	}
	if r := get(t, c, fronts[0]+"/"); r.code != 200 {
		t.Errorf("an unlimited route for the spent client: %d, want 200", r.code)
	}
}
