package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fetchJSON runs sluice fetch --json with args and returns its summary and
// error.
func fetchJSON(t *testing.T, args ...string) (fetchSummary, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), append([]string{"fetch", "--json"}, args...), &stdout, &stderr)
	var sum fetchSummary
	if jerr := json.Unmarshal(stdout.Bytes(), &sum); jerr != nil {
		t.Fatalf("output %q: %v (stderr %s)", stdout.String(), jerr, stderr.String())
	}
	return sum, stderr.String(), err
}

// TestFetchRobots: a robots.txt that disallows part of the list: those
// URLs fail without being sent, the rest are fetched; --robots=false
// fetches all.
func TestFetchRobots(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	sent := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		mu.Lock()
		sent[r.URL.Path]++
		mu.Unlock()
	}))
	defer srv.Close()
	var urls []string
	for i := range 6 {
		p := "/pub/"
		if i%3 == 0 {
			p = "/private/"
		}
		urls = append(urls, srv.URL+p+strconv.Itoa(i))
	}
	sum, stderr, err := fetchJSON(t, append([]string{"--rate", "100"}, urls...)...)
	if err == nil || sum.Succeeded != 4 || sum.Failed != 2 {
		t.Fatalf("robots: %+v, err %v; want 4 succeeded, 2 failed", sum, err)
	}
	if !strings.Contains(stderr, "disallowed by robots.txt") {
		t.Errorf("stderr %q does not say why", stderr)
	}
	mu.Lock()
	if sent["/private/0"]+sent["/private/3"] != 0 {
		t.Errorf("disallowed URLs were sent: %v", sent)
	}
	mu.Unlock()
	sum, _, err = fetchJSON(t, append([]string{"--rate", "100", "--robots=false"}, urls...)...)
	if err != nil || sum.Succeeded != 6 {
		t.Errorf("--robots=false: %+v, %v; want all 6", sum, err)
	}
}

// TestFetchGitHubStyle: a server that answers a spent budget with 403 and
// X-RateLimit-Remaining: 0 and X-RateLimit-Reset (Unix seconds), as
// GitHub does: no URL fails.
func TestFetchGitHubStyle(t *testing.T) {
	t.Parallel()
	const limit, window = 5, 2 * time.Second
	var mu sync.Mutex
	start := time.Now()
	count, idx, refused := 0, int64(0), 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if i := int64(now.Sub(start) / window); i != idx {
			idx, count = i, 0
		}
		end := start.Add(time.Duration(idx+1) * window)
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(limit))
		w.Header().Set("X-RateLimit-Resource", "core")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(end.Add(time.Second-1).Unix(), 10))
		if count >= limit {
			refused++
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/rate-limit"}`)
			return
		}
		count++
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(limit-count))
		w.Header().Set("X-RateLimit-Used", strconv.Itoa(count))
	}))
	defer srv.Close()
	var urls []string
	for i := range 12 {
		urls = append(urls, fmt.Sprintf("%s/repos/%d", srv.URL, i))
	}
	for _, mode := range []string{"pace", "spend"} {
		sum, stderr, err := fetchJSON(t, append([]string{"--budget", mode, "--adaptive-concurrency", "gradient"}, urls...)...)
		if err != nil || sum.Failed != 0 {
			t.Fatalf("github-style, --budget %s: %+v, err %v, stderr %s; want 0 failed", mode, sum, err, stderr)
		}
		mu.Lock()
		t.Logf("--budget %s: 12 URLs in %v ms, %d refused so far", mode, sum.ElapsedMS, refused)
		mu.Unlock()
	}
}

// TestFetchSluiceServe: against sluice's own gateway, which sends the IETF
// RateLimit and RateLimit-Policy fields, the client paces itself by them:
// all URLs fetched, fewer than 1% refused.
func TestFetchSluiceServe(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	cfg := `upstream: builtin:echo
headers: ietf
routes:
  - path: /
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: d
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: fixed_window, unit: second, unit_multiplier: 2, requests_per_unit: 8}
`
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, _, _ := serveProcess(t, "--config", file)
	var urls []string
	for i := range 24 {
		urls = append(urls, fmt.Sprintf("%s/item/%d", pub, i))
	}
	sum, stderr, err := fetchJSON(t, append([]string{"--concurrency", "4"}, urls...)...)
	if err != nil || sum.Failed != 0 {
		t.Fatalf("sluice serve: %+v, err %v, stderr %s", sum, err, stderr)
	}
	refused := sum.Status["429"]
	t.Logf("24 URLs in %d ms: status %v", sum.ElapsedMS, sum.Status)
	if refused*100 >= int64(sum.Requests) {
		t.Errorf("%d of %d refused, want < 1%%", refused, sum.Requests)
	}
}

func TestProgressLine(t *testing.T) {
	r := newProgressRate(time.Unix(0, 0))
	if got := progressLine(0, 100, 0, 0, r.rate); !strings.Contains(got, "-- URL/s  ETA --") {
		t.Errorf("before a measure: %q", got)
	}
	rate := r.update(time.Unix(2, 0), 20) // 10 URL/s
	got := progressLine(20, 100, 3, 1, rate)
	if !strings.Contains(got, "20/100  10.0 URL/s  ETA 8s  retries 3  429/503 1") {
		t.Errorf("progress %q", got)
	}
	if got := progressLine(100, 100, 0, 0, rate); !strings.Contains(got, "ETA 0s") || !strings.HasPrefix(got, "[##############################]") {
		t.Errorf("done: %q", got)
	}
}
