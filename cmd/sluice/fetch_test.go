package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// fetchServer is a token-bucket server on memstore, with Retry-After.
func fetchServer(t *testing.T, limit ratelimit.Limit) (*httptest.Server, func(int) int) {
	t.Helper()
	store := memstore.New(memstore.Options{SweepInterval: -1})
	var mu sync.Mutex
	counts := map[int]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		switch {
		case r.URL.Path == "/missing", r.URL.Path == "/robots.txt":
			code = http.StatusNotFound
		default:
			d, err := store.Apply(r.Context(), ratelimit.Request{Key: "k", Limit: limit, Algorithm: ratelimit.TokenBucket, N: 1})
			if err != nil || !d.Allowed {
				code = http.StatusTooManyRequests
				w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.DurationCeil(d.RetryAfter), 10))
			}
		}
		mu.Lock()
		counts[code]++
		mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprintf(w, "%s %s\n", r.URL.Path, http.StatusText(code))
	}))
	t.Cleanup(func() { srv.Close(); store.Close() })
	return srv, func(code int) int { mu.Lock(); defer mu.Unlock(); return counts[code] }
}

func TestFetchJSON(t *testing.T) {
	t.Parallel()
	srv, count := fetchServer(t, ratelimit.Limit{Rate: 50, Period: time.Second, Burst: 5})
	var urls []string
	for i := range 40 {
		urls = append(urls, fmt.Sprintf("%s/item/%d", srv.URL, i))
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"fetch", "--json", "--rate", "40", "--adaptive", "--concurrency", "4"}, urls...)
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("fetch: %v\nstderr: %s", err, stderr.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", stdout.String(), err)
	}
	for _, k := range []string{"requests", "succeeded", "failed", "attempts", "retries", "status", "hosts", "elapsed_ms"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary has no %q: %s", k, stdout.String())
		}
	}
	if sum["requests"] != 40.0 || sum["succeeded"] != 40.0 || sum["failed"] != 0.0 {
		t.Errorf("summary %s, want 40 requests, all succeeded", stdout.String())
	}
	st := sum["status"].(map[string]any)
	if st["200"] != 40.0 || count(200) != 40 {
		t.Errorf("status %v (server saw %d 200s), want 40 × 200", st, count(200))
	}
	if n := count(429); n > 4 {
		t.Errorf("server sent %d 429s, want at most 4", n)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if r, ok := sum["hosts"].(map[string]any)[host].(float64); !ok || r <= 0 {
		t.Errorf("hosts %v, want a rate for %s", sum["hosts"], host)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q, want nothing (not a terminal)", stderr.String())
	}
}

func TestFetchFileAndOutput(t *testing.T) {
	t.Parallel()
	srv, _ := fetchServer(t, ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 10})
	dir := t.TempDir()
	list := filepath.Join(dir, "urls.txt")
	content := fmt.Sprintf("# a comment\n%s/a/b.txt\n\n%s/\n%s/q?x=1\n%s/missing\n", srv.URL, srv.URL, srv.URL, srv.URL)
	if err := os.WriteFile(list, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"fetch", "--rate", "50", "-i", list, "-o", out}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "1 of 4 URLs failed") {
		t.Fatalf("fetch = %v, want 1 of 4 failed (the 404)", err)
	}
	host := strings.ReplaceAll(strings.TrimPrefix(srv.URL, "http://"), ":", "_")
	for name, want := range map[string]string{
		"a/b.txt":    "/a/b.txt OK\n",
		"index.html": "/ OK\n",
		"q_x=1":      "/q OK\n",
	} {
		got, err := os.ReadFile(filepath.Join(out, host, name))
		if err != nil || string(got) != want {
			t.Errorf("saved %s = %q, %v, want %q", name, got, err, want)
		}
	}
	s := stdout.String()
	for _, want := range []string{"fetched 4 URLs", "3 succeeded, 1 failed", "200×3", "404×1", "failed: " + srv.URL + "/missing: 404 Not Found"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q does not contain %q", s, want)
		}
	}
}

func TestFetchUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"fetch", "--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(stderr.String(), "Usage: sluice fetch") || !strings.Contains(stderr.String(), "-concurrency") {
		t.Errorf("--help printed %q", stderr.String())
	}
	for _, args := range [][]string{
		{"fetch"},
		{"fetch", "ftp://x/y"},
		{"fetch", "--rate", "-1", "http://x/"},
		{"fetch", "--backoff", "linear", "http://x/"},
		{"fetch", "--random-delay", "-1s", "http://x/"},
		{"fetch", "--nope", "http://x/"},
	} {
		if err := run(t.Context(), args, &stdout, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

func TestFetchPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://h:8080/":             "d/h_8080/index.html",
		"http://h/a/../../../etc/pw": "d/h/a/etc/pw",
		"http://h/x?y=/z":            "d/h/x_y=_z",
		"http://h":                   "d/h/index.html",
	} {
		u, _ := url.Parse(in)
		if got := fetchPath("d", u); got != want {
			t.Errorf("fetchPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFetchHeaders: -H/--header (repeatable) and -A/--user-agent reach the
// server; the default User-Agent is sluice-fetch/VERSION.
func TestFetchHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []http.Header
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		got = append(got, r.Header.Clone())
		hosts = append(hosts, r.Host)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	fetch := func(args ...string) http.Header {
		t.Helper()
		mu.Lock()
		got, hosts = nil, nil
		mu.Unlock()
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), append(append([]string{"fetch"}, args...), srv.URL+"/"), &stdout, &stderr); err != nil {
			t.Fatalf("fetch %q = %v\n%s", args, err, stderr.String())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("server saw %d requests, want 1", len(got))
		}
		return got[0]
	}
	if ua := fetch().Get("User-Agent"); !strings.HasPrefix(ua, "sluice-fetch/") {
		t.Errorf("default User-Agent %q, want sluice-fetch/VERSION", ua)
	}
	h := fetch("-H", "X-API-Key: demo-key", "--header", "Accept:text/plain", "-H", "X-Multi: a", "-H", "X-Multi: b", "-A", "bot/1.0")
	if h.Get("X-Api-Key") != "demo-key" || h.Get("Accept") != "text/plain" || strings.Join(h.Values("X-Multi"), ",") != "a,b" || h.Get("User-Agent") != "bot/1.0" {
		t.Errorf("server saw headers %v", h)
	}
	if ua := fetch("--user-agent", "a", "-H", "User-Agent: b").Get("User-Agent"); ua != "b" {
		t.Errorf("User-Agent %q, want -H's b over -A's a", ua)
	}
	fetch("-H", "Host: example.test")
	if hosts[0] != "example.test" {
		t.Errorf("Host %q, want example.test", hosts[0])
	}
	for _, bad := range []string{"no-colon", ": empty", "Bad Name: x", "X: a\rb"} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"fetch", "-H", bad, srv.URL}, &stdout, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "-H") {
			t.Errorf("fetch -H %q = %v, stderr %q, want a usage error naming -H", bad, err, stderr.String())
		}
	}
}

// TestFetchRefused: a refused connection is retried twice, not seven
// times, and the summary says no status came back.
func TestFetchRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL + "/"
	srv.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"fetch", "--json", "--robots=false", "--base-delay", "1ms", u}, &stdout, &stderr)
	if err == nil {
		t.Fatal("fetch of a closed port = nil, want an error")
	}
	var sum fetchSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if sum.Attempts != 1+fetchRefusedRetries || sum.Retries != fetchRefusedRetries || len(sum.Status) != 0 {
		t.Errorf("summary %+v, want %d attempts, %d retries, no status", sum, 1+fetchRefusedRetries, fetchRefusedRetries)
	}
	if !strings.Contains(stderr.String(), "refused") {
		t.Errorf("stderr %q, want the refused connection", stderr.String())
	}
	stdout.Reset()
	run(t.Context(), []string{"fetch", "--robots=false", u}, &stdout, &stderr)
	for _, want := range []string{"fetched 1 URL in", "attempts 3 (2 retries); no status: no response came back"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary %q lacks %q", stdout.String(), want)
		}
	}
	// Obeying robots.txt, an unreachable one holds the URL back (RFC
	// 9309), and the message says the host is unreachable, not that
	// robots.txt disallows the URL.
	stdout.Reset()
	if err := run(t.Context(), []string{"fetch", "--base-delay", "1ms", u}, &stdout, io.Discard); err == nil ||
		strings.Contains(stdout.String(), "disallowed") || !strings.Contains(stdout.String(), "unreachable") || !strings.Contains(stdout.String(), "refused") {
		t.Errorf("with robots.txt: %v, output %q, want the host unreachable, with the refused connection", err, stdout.String())
	}
}

func TestFetchSummaryPlurals(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	fetchPrintSummary(&b, fetchSummary{Requests: 1, Succeeded: 1, Attempts: 1, Retries: 1, Status: map[string]int64{"200": 1}}, nil)
	if want := "fetched 1 URL in 0s: 1 succeeded, 0 failed\nattempts 1 (1 retry); status 200×1\n"; b.String() != want {
		t.Errorf("summary %q, want %q", b.String(), want)
	}
}

// TestFetchInterrupted: a cancelled run (Ctrl-C) returns an error that
// main turns into exit status 130.
func TestFetchInterrupted(t *testing.T) {
	t.Parallel()
	srv, _ := fetchServer(t, ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 10})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"fetch", srv.URL + "/a", srv.URL + "/b"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("fetch with a cancelled context = %v, want interrupted", err)
	}
	if code := exitCode(err, true, &bytes.Buffer{}); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
}
