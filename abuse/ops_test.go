package abuse

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Attack: a caller reaches the admin listener and tries the admin API
// (reset someone's limit, raise its own) without the token, with a wrong
// one, with the token in the query string instead of the header.
//
// Bound: every such call is 401 and changes nothing; a gateway configured
// without a token refuses the admin API altogether (403); only the bearer
// token acts.
func TestAdminAPIWithoutToken(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	dir := t.TempDir()
	const token = "abuse-admin-token-0123456789abcdef"
	writeFile(t, dir, "admin.token", token+"\n")
	base := fmt.Sprintf(`
upstream: %s
routes:
  - path: /
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: abuse-admin
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: fixed_window, unit: hour, requests_per_unit: 2}
`, up.srv.URL)
	g := startServe(t, writeFile(t, dir, "with-token.yaml", base+"admin_token_file: admin.token\n"))
	c := client(t)
	for range 3 {
		do(t, c, "GET", g.url+"/x")
	}
	if code, _, _ := do(t, c, "GET", g.url+"/x"); code != 429 {
		t.Fatalf("after 3 requests: %d, want 429", code)
	}
	reset := `{"rule":"per-ip","identity":"ip:127.0.0.1"}`
	for _, tc := range []struct {
		name string
		url  string
		hdr  []string
	}{
		{"no token", g.admin + "/admin/reset", nil},
		{"wrong token", g.admin + "/admin/reset", []string{"Authorization", "Bearer wrong-token-0123456789abcdef00"}},
		{"token prefix", g.admin + "/admin/reset", []string{"Authorization", "Bearer " + token[:10]}},
		{"token in the query", g.admin + "/admin/reset?token=" + token, nil},
		{"basic auth", g.admin + "/admin/reset", []string{"Authorization", "Basic " + token}},
	} {
		req, _ := http.NewRequest("POST", tc.url, strings.NewReader(reset))
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			req.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("%s: %d, want 401", tc.name, res.StatusCode)
		}
	}
	if code, _, _ := do(t, c, "GET", g.url+"/x"); code != 429 {
		t.Errorf("after the refused admin calls: %d, want still 429", code)
	}
	// The same call with the bearer token does reset: the refusals
	// above were the token's doing, not a malformed call.
	req, _ := http.NewRequest("POST", g.admin+"/admin/reset", strings.NewReader(reset))
	req.Header.Set("Authorization", "Bearer "+token)
	if res, err := c.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("reset with the token: %v %v, want 200", res, err)
	} else {
		res.Body.Close()
	}
	if code, _, _ := do(t, c, "GET", g.url+"/x"); code != 200 {
		t.Errorf("after the reset with the token: %d, want 200", code)
	}
	// Without a configured token, the admin API is off whatever is sent.
	g2 := startServe(t, writeFile(t, dir, "no-token.yaml", base))
	req, _ = http.NewRequest("POST", g2.admin+"/admin/reset", strings.NewReader(reset))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Errorf("no token configured: %d, want 403", res.StatusCode)
	}
}

// Attack: a caller hammers GET /rate_limit (free for callers, as
// GitHub's) to watch others or to load the store, and hopes reading it
// spends or resets its own budget.
//
// Bound: /rate_limit is itself limited (a burst of 20, then 429 with
// Retry-After), and no number of reads charges or refills the caller's
// rules: the next real request sees the remaining it saw before.
func TestRateLimitEndpointFlood(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	dir := t.TempDir()
	g := startServe(t, writeFile(t, dir, "gw.yaml", fmt.Sprintf(`
upstream: %s
headers: ietf
rate_limit_endpoint: /rate_limit
routes:
  - path: /
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: abuse-rl
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: fixed_window, unit: hour, requests_per_unit: 5}
`, up.srv.URL)))
	c := client(t)
	_, h, _ := do(t, c, "GET", g.url+"/x")
	before := h.Get("RateLimit")
	n429 := 0
	for range 200 {
		code, h, _ := do(t, c, "GET", g.url+"/rate_limit")
		if code == 429 {
			n429++
			if h.Get("Retry-After") == "" {
				t.Fatal("429 from /rate_limit without Retry-After")
			}
		}
	}
	if n429 < 150 {
		t.Errorf("%d of 200 reads refused, want /rate_limit limited (at most a burst of 20 and a few refills)", n429)
	}
	_, h, _ = do(t, c, "GET", g.url+"/x")
	if !strings.HasPrefix(before, `"per-ip";r=4;`) {
		t.Fatalf("first request: RateLimit %q", before)
	}
	if got := h.Get("RateLimit"); !strings.HasPrefix(got, `"per-ip";r=3;`) {
		t.Errorf("after 200 reads of /rate_limit, the next request's RateLimit is %q, want r=3 (reads charge nothing)", got)
	}
	g.alive(t)
}

// Attack: one caller opens many slow requests at once, to hold the
// upstream's workers (the "thousands of slow requests" that a rate
// limit alone does not stop).
//
// Bound: with in_flight {max: 3}, at most 3 of the caller's requests reach
// the upstream at once; the rest are answered 429 with Retry-After at
// once, and the slots come back when the slow requests end.
func TestSlowRequestFlood(t *testing.T) {
	t.Parallel()
	var inflight, peak atomic.Int64
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		w.Write([]byte("slow ok\n"))
	}))
	t.Cleanup(slow.Close)
	dir := t.TempDir()
	g := startServe(t, writeFile(t, dir, "gw.yaml", fmt.Sprintf(`
upstream: %s
in_flight: {max: 3, retry_after: 2s}
routes:
  - path: /
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: abuse-slow
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: second, requests_per_unit: 1000}
`, slow.URL)))
	c := client(t)
	var wg sync.WaitGroup
	var n429, n200 atomic.Int64
	for range 20 {
		wg.Go(func() {
			code, h, _, err := tryDo(c, "GET", g.url+"/slow")
			switch {
			case err != nil:
			case code == 429:
				if h.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
				n429.Add(1)
			case code == 200:
				n200.Add(1)
			}
		})
	}
	// The refused ones return at once; the 3 admitted wait for release.
	deadline := time.Now().Add(30 * time.Second) // a bound, not a timing assertion
	for n429.Load() < 17 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p > 3 {
		t.Errorf("%d of one caller's requests reached the upstream at once, want at most 3", p)
	}
	if n429.Load() != 17 || n200.Load() != 3 {
		t.Errorf("%d admitted, %d refused; want 3 and 17", n200.Load(), n429.Load())
	}
	// The slots came back.
	if code, _, _ := do(t, c, "GET", g.url+"/after"); code != 200 {
		t.Errorf("after the slow requests ended: %d, want 200", code)
	}
	g.alive(t)
}
