package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/envoystyle"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// A target is one fresh server for one client's run. What it receives
// and refuses is counted by each client's counting transport, below every
// layer of the client, so that every server is counted alike.
type target interface {
	URL() string
	Close()
	// Schedule is the soonest a client that started at start can have
	// sent n requests without a refusal, computed from the limit the
	// server announces (0 where it announces none).
	Schedule(start time.Time, n int) time.Duration
}

// windowSchedule is the schedule of a fixed window of q requests: the
// last of n requests goes at the start of the window (n-1)/q after the
// first one's, whose windows end at resets.
func windowSchedule(start time.Time, n, q int, reset func(k int) time.Time) time.Duration {
	j := (n - 1) / q
	if j == 0 {
		return 0
	}
	return max(0, reset(j-1).Sub(start))
}

// epochResets are the resets of windows of w aligned to the Unix epoch,
// the first the end of the window holding start.
func epochResets(start time.Time, w time.Duration) func(k int) time.Time {
	first := start.Truncate(w).Add(w)
	return func(k int) time.Time { return first.Add(time.Duration(k) * w) }
}

// bucketTarget is the in-process token bucket server of the retry-after
// and bare scenarios.
type bucketTarget struct {
	hs    *httptest.Server
	store *memstore.Store
}

func newBucketTarget(cfg Config) *bucketTarget {
	store := memstore.New(memstore.Options{SweepInterval: -1})
	srv := &server{store: store, limit: ratelimit.Limit{Rate: cfg.Rate, Period: time.Second, Burst: cfg.Burst}, retryAfter: cfg.Scenario == "retry-after"}
	return &bucketTarget{hs: httptest.NewServer(srv), store: store}
}

func (b *bucketTarget) URL() string { return b.hs.URL }

// Schedule: the bare token bucket announces nothing.
func (b *bucketTarget) Schedule(time.Time, int) time.Duration { return 0 }
func (b *bucketTarget) Close()                                { b.hs.Close(); b.store.Close() }

// githubTarget answers as GitHub's REST API does (docs.github.com, "Rate
// limits for the REST API"): a primary limit per window, announced on
// every answer in X-RateLimit-Limit/-Remaining/-Used/-Reset (Unix
// seconds)/-Resource, refused with 403 and Remaining 0 when spent; and a
// secondary limit on concurrent requests, refused with 403, Retry-After
// and a message naming it.
type githubTarget struct {
	hs            *httptest.Server
	limit         int
	window        time.Duration
	maxConcurrent int64

	inflight atomic.Int64
	mu       sync.Mutex
	start    time.Time
	idx      int64
	used     int
}

func newGitHubTarget(cfg Config) *githubTarget {
	g := &githubTarget{limit: int(cfg.Rate * int64(cfg.Window/time.Second)), window: cfg.Window, maxConcurrent: int64(cfg.Concurrency / 2), start: time.Now()}
	g.hs = httptest.NewServer(g)
	return g
}

func (g *githubTarget) URL() string { return g.hs.URL }

// Schedule: windows from the server's start, each announced to reset at
// its end rounded up to the second.
func (g *githubTarget) Schedule(start time.Time, n int) time.Duration {
	idx := int(start.Sub(g.start) / g.window)
	return windowSchedule(start, n, g.limit, func(k int) time.Time {
		end := g.start.Add(time.Duration(idx+k+1) * g.window)
		return time.Unix(end.Add(time.Second-1).Unix(), 0)
	})
}
func (g *githubTarget) Close() { g.hs.Close() }

func (g *githubTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	n := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	time.Sleep(2 * time.Millisecond) // some work, so that concurrency is visible
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	if n > g.maxConcurrent {
		h.Set("Retry-After", "1")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`)
		return
	}
	g.mu.Lock()
	now := time.Now()
	if i := int64(now.Sub(g.start) / g.window); i != g.idx {
		g.idx, g.used = i, 0
	}
	reset := g.start.Add(time.Duration(g.idx+1) * g.window)
	ok := g.used < g.limit
	if ok {
		g.used++
	}
	used := g.used
	g.mu.Unlock()
	h.Set("X-RateLimit-Limit", strconv.Itoa(g.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(g.limit-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	// GitHub's reset is whole Unix seconds; round up, so that a client
	// that waits for it is not early.
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Add(time.Second-1).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	if !ok {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits","status":"403"}`)
		return
	}
	io.WriteString(w, `{"ok":true}`)
}

// gatewayTarget is sluice's own gateway, `sluice serve`, as a real process
// in front of its built-in echo upstream: a fixed window per client
// address, announced in the IETF RateLimit and RateLimit-Policy fields,
// 429 with Retry-After when spent.
type gatewayTarget struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	cfg  Config
}

// Schedule: the fixed window (aligned to the Unix epoch, as the gateway's
// are) holds Rate × Window requests; the token bucket (the bucket
// scenario) Burst at once, refilled at Rate a second.
func (g *gatewayTarget) Schedule(start time.Time, n int) time.Duration {
	if g.cfg.Scenario == "bucket" {
		return time.Duration(float64(max(0, n-int(g.cfg.Burst))) / float64(g.cfg.Rate) * float64(time.Second))
	}
	q := int(g.cfg.Rate * int64(g.cfg.Window/time.Second))
	return windowSchedule(start, n, q, epochResets(start, g.cfg.Window))
}

var (
	sluiceOnce sync.Once
	sluiceBin  string
	sluiceErr  error
)

// buildSluice builds cmd/sluice from the parent module, once.
func buildSluice() (string, error) {
	sluiceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bench-client-")
		if err != nil {
			sluiceErr = err
			return
		}
		sluiceBin = filepath.Join(dir, "sluice")
		// Built in the sluice module itself (the bench module's replace
		// points there), with its own dependencies.
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/sluicehq/sluice").Output()
		if err != nil {
			sluiceErr = fmt.Errorf("find the sluice module: %v", err)
			return
		}
		cmd := exec.Command("go", "build", "-o", sluiceBin, "./cmd/sluice")
		cmd.Dir = strings.TrimSpace(string(root))
		if out, err := cmd.CombinedOutput(); err != nil {
			sluiceErr = fmt.Errorf("build sluice: %v\n%s", err, out)
		}
	})
	return sluiceBin, sluiceErr
}

func newGatewayTarget(cfg Config) (*gatewayTarget, error) {
	bin, err := buildSluice()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-gateway-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "gateway.yaml")
	rule := fmt.Sprintf("{name: per-client, algorithm: fixed_window, unit: second, unit_multiplier: %d, requests_per_unit: %d}",
		int64(cfg.Window/time.Second), cfg.Rate*int64(cfg.Window/time.Second))
	if cfg.Scenario == "bucket" {
		rule = fmt.Sprintf("{name: per-client, algorithm: token_bucket, unit: second, requests_per_unit: %d, burst: %d}", cfg.Rate, cfg.Burst)
	}
	conf := fmt.Sprintf(`upstream: builtin:echo
headers: ietf
routes:
  - path: /
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: bench
  descriptors:
    - key: remote_address
      rate_limit: %s
`, rule)
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", file, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &gatewayTarget{cmd: cmd, done: make(chan struct{}), cfg: cfg}
	addrs := make(chan [2]string, 1)
	re := regexp.MustCompile(`msg="sluice serve: listening" addr=(\S+) admin=(\S+)`)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrs <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
		close(g.done)
	}()
	select {
	case a := <-addrs:
		g.url = "http://" + a[0]
	case <-g.done:
		return nil, fmt.Errorf("sluice serve exited before listening")
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("sluice serve did not log its addresses")
	}
	return g, nil
}

func (g *gatewayTarget) URL() string { return g.url }

func (g *gatewayTarget) Close() {
	g.cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		g.cmd.Process.Kill()
	}
	g.cmd.Wait()
}

// counting is the bottom of every client's stack: it counts what reaches
// the server and what the server refuses (429, and 403 with a rate limit's
// marks), leaving out robots.txt fetches.
type counting struct {
	base          http.RoundTripper
	sent, refused atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if r.URL.Path == "/robots.txt" {
		return resp, err
	}
	c.sent.Add(1)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden) {
		c.refused.Add(1)
	}
	return resp, err
}

// envoyTarget is an envoyproxy/ratelimit-style server (package
// envoystyle: a fixed window aligned to the Unix epoch in X-RateLimit-*,
// draft 03, a bare 429 when spent).
type envoyTarget struct {
	hs  *httptest.Server
	srv *envoystyle.Server
}

func newEnvoyTarget(cfg Config) *envoyTarget {
	e := &envoyTarget{srv: &envoystyle.Server{Limit: int(cfg.Rate * int64(cfg.Window/time.Second)), Window: cfg.Window}}
	e.hs = httptest.NewServer(e.srv)
	return e
}

func (e *envoyTarget) URL() string { return e.hs.URL }
func (e *envoyTarget) Close()      { e.hs.Close() }

func (e *envoyTarget) Schedule(start time.Time, n int) time.Duration {
	return windowSchedule(start, n, e.srv.Limit, epochResets(start, e.srv.Window))
}
