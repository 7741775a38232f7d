package abuse

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// redisGateway writes a gateway config on store url with one route
// limited to n requests an hour, failure policy policy.
func redisGateway(t testing.TB, url, policy string, n int) string {
	return redisGatewayKey(t, url, policy, n, "all")
}

// redisGatewayKey is redisGateway with the rule's value (the key in
// Redis) chosen, for gateways that share a Redis.
func redisGatewayKey(t testing.TB, url, policy string, n int, value string) string {
	return writeFile(t, t.TempDir(), "gateway.yaml", fmt.Sprintf(`
upstream: builtin:echo
store: %s
on_store_error: %s
routes:
  - path: /
    rate_limits:
      - actions: [{generic_key: {descriptor_value: %[4]s}}]
rules:
  domain: abuse
  descriptors:
    - key: generic_key
      value: %[4]s
      rate_limit: {name: %[4]s, algorithm: token_bucket, unit: hour, requests_per_unit: %[3]d}
`, url, policy, n, value))
}

// redisRules writes an RLS config directory with one rule: n an hour per
// value of k.
func redisRules(t testing.TB, n int) string {
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", fmt.Sprintf(`
domain: abuse
descriptors:
  - key: k
    rate_limit: {name: k, algorithm: token_bucket, unit: hour, requests_per_unit: %d}
`, n))
	return dir
}

// Attack (or bad luck): Redis is down when sluice starts. It used to exit,
// whatever the failure policy said: a full outage.
//
// Bound: `sluice serve` and `sluice rls` start anyway; their failure
// policy answers from the first request (allow: 200, deny: 503 from the
// gateway, OVER_LIMIT from the RLS); when a
// redis-server comes up on the port they go back to Redis by themselves
// (within the store's reconnect backoff, 5 s at most between probes,
// here 15 s with slack), which the limits show (a rule of 2 an hour
// denies again), sluice_store_up (0, then 1), sluice_redis_reconnects_total
// and /readyz's store line report.
func TestRedisDownAtStart(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rs.Kill() // the port is known and nothing listens on it
	const n = 2
	const back = 15 * time.Second

	type door struct {
		name   string
		policy string
		ask    func() (int, error) // one request: the status
		admin  string              // where /metrics (and /readyz) are
	}
	var doors []door
	for _, policy := range []string{"allow", "deny"} {
		g, err := tryServe(t, redisGatewayKey(t, rs.URL(), policy, n, policy))
		if err != nil {
			t.Fatalf("sluice serve with Redis down, on_store_error: %s: %v", policy, err)
		}
		c := client(t)
		doors = append(doors, door{"serve/" + policy, policy, func() (int, error) {
			code, _, _, err := tryDo(c, "GET", g.url+"/")
			return code, err
		}, g.admin})
		r, err := tryRLS(t, redisRules(t, n), "--store", rs.URL(), "--on-store-error", policy)
		if err != nil {
			t.Fatalf("sluice rls with Redis down, --on-store-error %s: %v", policy, err)
		}
		rc := &http.Client{Timeout: 10 * time.Second}
		doors = append(doors, door{"rls/" + policy, policy, func() (int, error) {
			code, _, err := r.tryDecide(rc, "abuse", 1, [][2]string{{"k", policy}})
			return code, err
		}, r.http})
	}
	for _, d := range doors {
		// deny: the gateway answers 503 "limiter unavailable"; the RLS
		// OVER_LIMIT, which its HTTP door (as Envoy) answers 429.
		want := map[string]int{"allow": http.StatusOK, "deny": http.StatusTooManyRequests}[d.policy]
		if d.name == "serve/deny" {
			want = http.StatusServiceUnavailable
		}
		for i := 0; i < 2*n; i++ {
			code, err := d.ask()
			if err != nil || code != want {
				t.Errorf("%s, Redis down, request %d: %d %v, want %d", d.name, i+1, code, err, want)
			}
		}
	}
	// Visible to an operator: sluice_store_up and /readyz's store line.
	for _, d := range doors {
		if up := scrape(t, d.admin).value(t, "sluice_store_up"); up != 0 {
			t.Errorf("%s, Redis down: sluice_store_up %v, want 0", d.name, up)
		}
		if _, _, body := do(t, http.DefaultClient, "GET", d.admin+"/readyz"); !strings.Contains(body, ": disconnected since") {
			t.Errorf("%s, Redis down: /readyz says %q, want a store line saying it is disconnected", d.name, body)
		}
	}

	if err := rs.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var wg sync.WaitGroup
	for _, d := range doors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Back on Redis: allow could not deny, deny could not admit;
			// then the rule's n admitted, and 429.
			var codes []int
			want := http.StatusTooManyRequests
			if d.policy == "deny" {
				want = http.StatusOK
			}
			for time.Since(restarted) < back {
				code, err := d.ask()
				if err != nil {
					t.Errorf("%s: %v", d.name, err)
					return
				}
				codes = append(codes, code)
				if code == want {
					t.Logf("%s: back on Redis %v after it started", d.name, time.Since(restarted).Round(time.Millisecond))
					for range n + 1 {
						code, err = d.ask()
						codes = append(codes, code)
					}
					if code != http.StatusTooManyRequests {
						t.Errorf("%s: back on Redis, %d more requests on a rule of %d: answers %v", d.name, n+1, n, codes)
					}
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("%s: not back on Redis %v after it started: answers %v", d.name, back, codes)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, d := range doors {
		m := scrape(t, d.admin)
		if up := m.value(t, "sluice_store_up"); up != 1 {
			t.Errorf("%s, back on Redis: sluice_store_up %v, want 1", d.name, up)
		}
		if n := m.value(t, "sluice_redis_reconnects_total"); n < 1 {
			t.Errorf("%s, back on Redis: sluice_redis_reconnects_total %v, want at least 1", d.name, n)
		}
		if _, _, body := do(t, http.DefaultClient, "GET", d.admin+"/readyz"); !strings.Contains(body, ": connected since") {
			t.Errorf("%s, back on Redis: /readyz says %q, want a store line saying it is connected", d.name, body)
		}
	}
}

// The same attack against a gateway config that does not name a failure
// policy: docs/gateway.md, the example config and gateway.Config say the
// default is allow (as fail_closed: false was before on_store_error), so
// Redis down must not turn every limited request into an error.
func TestRedisDownAtStartDefaultPolicy(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rs.Kill()
	cfg := redisGateway(t, rs.URL(), "allow", 2)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, cfg, strings.Replace(string(b), "on_store_error: allow\n", "", 1))
	g := startServe(t, cfg)
	if code, _, body := do(t, client(t), "GET", g.url+"/"); code != http.StatusOK {
		t.Errorf("no on_store_error, Redis down: %d %s, want the documented default allow's 200", code, body)
	}
}

// Attack (or bad luck): Redis hangs (SIGSTOP: connections stay open,
// nothing answers). Calls queued behind a hung batch were timed from the
// batch's start and then waited again in the next one, twice the bound.
//
// Bound: every request, even 20 sent at once, is answered within 1.25 ×
// the store timeout from when it was sent (redisstore's documented bound,
// measured from when a call is queued), plus a slack for the two
// processes on a loaded machine; the failure policy answers it (allow:
// 200); Redis's return (SIGCONT) is taken up again.
func TestRedisHung(t *testing.T) {
	rs := redistest.Start(t)
	const burst = 20
	check := func(t *testing.T, name string, timeout, slack time.Duration, ask func() (int, error)) {
		// Warm: the connection is up and the scripts loaded.
		if code, err := ask(); err != nil || code != http.StatusOK {
			t.Fatalf("%s before the hang: %d %v", name, code, err)
		}
		if err := rs.Pause(); err != nil {
			t.Fatal(err)
		}
		resumed := false
		defer func() {
			if !resumed {
				rs.Resume()
			}
		}()
		bound := timeout*5/4 + slack
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for round := 0; round < 3; round++ {
			for range burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					code, err := ask()
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					if err != nil || code != http.StatusOK {
						t.Errorf("%s, Redis hung: %d %v after %v, want allow's 200", name, code, err, d)
					}
				}()
			}
			wg.Wait()
		}
		slices.Sort(lat)
		t.Logf("%s: Redis hung, %d requests in bursts of %d: median %v, max %v (bound %v = 1.25 × %v + %v)",
			name, len(lat), burst, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), bound, timeout, slack)
		if worst := lat[len(lat)-1]; worst > bound {
			t.Errorf("%s: a request took %v with Redis hung, want at most %v", name, worst.Round(time.Millisecond), bound)
		}
		if err := rs.Resume(); err != nil {
			t.Fatal(err)
		}
		resumed = true
	}
	t.Run("rls", func(t *testing.T) {
		// A timeout long enough that the old double wait (2 × 800 ms)
		// stands clear of the bound plus a slack for a loaded machine,
		// where a process may stall for 100 ms and more (redisstore's
		// TestHungWaitBound measured such stalls).
		const timeout = 800 * time.Millisecond
		r := startRLS(t, redisRules(t, 1000000), "--store", rs.URL(), "--on-store-error", "allow", "--store-timeout", timeout.String())
		c := &http.Client{Timeout: 10 * time.Second}
		check(t, "rls", timeout, 300*time.Millisecond, func() (int, error) {
			code, _, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", "v"}})
			return code, err
		})
		eventually(t, 10*time.Second, func() error {
			if code, _, err := r.tryDecide(c, "abuse", 1000000, [][2]string{{"k", "v"}}); err != nil || code != http.StatusTooManyRequests {
				return fmt.Errorf("after SIGCONT, a request of a million hits: %d %v, want Redis's 429", code, err)
			}
			return nil
		})
	})
	t.Run("serve", func(t *testing.T) {
		// The gateway has no store timeout setting: redisstore's 100 ms.
		// The slack is wide for a loaded machine; the rls case is the
		// one that tells 1.25 from 2 × the timeout.
		const timeout = 100 * time.Millisecond
		g := startServe(t, redisGateway(t, rs.URL(), "allow", 1000000))
		c := client(t)
		check(t, "serve", timeout, 250*time.Millisecond, func() (int, error) {
			code, _, _, err := tryDo(c, "GET", g.url+"/")
			return code, err
		})
	})
}

// Attack: a store outage under load turns into a logging outage: a line
// per rule per request (20k lines a second at 20k requests a second in
// before the fix), and a flood of denials the same.
//
// Bound: store failures and denials are logged aggregated, one line per
// (kind, rule) per interval (10 s) plus the first of a quiet pair at once
// (internal/server/eventlog), and Redis's own failures at most once per probe
// (1 s growing to 5 s): 2000 requests during an outage, or 2000 denials,
// write at most 20 lines, and the log says what happened (a server that
// started without Redis says so once, at start).
func TestLogAmplification(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rs.Kill()
	const requests, maxLines = 2000, 20
	burst := func(t *testing.T, p *proc, ask func() (int, error), want int) []string {
		start := time.Now()
		err := parallel(requests, 8, func(int) error {
			code, err := ask()
			if err != nil {
				return err
			}
			if code != want {
				return fmt.Errorf("%d, want %d", code, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the lines written at once
		lines := p.lines(start)
		t.Logf("%d requests in %v: %d log lines", requests, time.Since(start).Round(time.Millisecond), len(lines))
		if len(lines) > maxLines {
			t.Errorf("%d requests wrote %d log lines, want at most %d; the first:\n%s", requests, len(lines), maxLines, strings.Join(lines[:min(len(lines), 10)], "\n"))
		}
		return lines
	}
	// said checks that the process's log (from its start: a server that
	// started without Redis says so once, then its failure policy answers
	// quietly) says what happened.
	said := func(t *testing.T, p *proc, what string, words ...string) {
		for _, l := range p.lines(time.Time{}) {
			for _, w := range words {
				if strings.Contains(strings.ToLower(l), w) {
					return
				}
			}
		}
		t.Errorf("%s: no log line says so (looked for %q)", what, words)
	}
	t.Run("serve/outage", func(t *testing.T) {
		t.Parallel()
		g := startServe(t, redisGateway(t, rs.URL(), "allow", 1000000))
		c := client(t)
		burst(t, g.proc, func() (int, error) {
			code, _, _, err := tryDo(c, "GET", g.url+"/")
			return code, err
		}, http.StatusOK)
		said(t, g.proc, "a Redis outage", "redis", "store")
	})
	t.Run("rls/outage", func(t *testing.T) {
		t.Parallel()
		r := startRLS(t, redisRules(t, 1000000), "--store", rs.URL(), "--on-store-error", "allow")
		c := &http.Client{Timeout: 10 * time.Second}
		burst(t, r.proc, func() (int, error) {
			code, _, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", "v"}})
			return code, err
		}, http.StatusOK)
		said(t, r.proc, "a Redis outage", "redis", "store")
	})
	t.Run("serve/denials", func(t *testing.T) {
		t.Parallel()
		g := startServe(t, redisGateway(t, "memory", "allow", 1))
		c := client(t)
		do(t, c, "GET", g.url+"/")
		burst(t, g.proc, func() (int, error) {
			code, _, _, err := tryDo(c, "GET", g.url+"/")
			return code, err
		}, http.StatusTooManyRequests)
		said(t, g.proc, "a flood of denials", "denied", "denial", "over")
	})
	t.Run("rls/denials", func(t *testing.T) {
		t.Parallel()
		r := startRLS(t, redisRules(t, 1))
		c := &http.Client{Timeout: 10 * time.Second}
		r.decide(t, "abuse", 1, [][2]string{{"k", "v"}})
		burst(t, r.proc, func() (int, error) {
			code, _, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", "v"}})
			return code, err
		}, http.StatusTooManyRequests)
		said(t, r.proc, "a flood of denials", "denied", "denial", "over")
	})
}

// Attack: a client sends requests and goes away before each answer
// (cancelled gRPC calls, closed connections), so that the store's call to
// Redis for it is cancelled. A lone fixed-window charge went to Redis on
// the caller's context, and three cancelled ones in a row counted as
// Redis failures and opened the store's breaker: every other caller then
// got the failure policy for the cooldown (rls-sweep's ghz rounds hit it).
//
// Bound: a caller that goes away is not a failure of Redis: after 300
// requests abandoned mid-flight, sluice_store_up is still 1, no failure
// is counted, and the next caller is decided by Redis (200, then 429 at
// the limit, not the failure policy's answer).
func TestCancelledCallersKeepTheBreakerClosed(t *testing.T) {
	t.Parallel()
	r, _ := rlsOnRedis(t, "k", "--on-store-error", "allow")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 75 {
				// A client that gives up after 50–800 µs: most requests are
				// abandoned while the store is calling Redis.
				c := &http.Client{Timeout: time.Duration(50+(i*37+w*11)%750) * time.Microsecond}
				r.tryDecide(c, "abuse", 1, [][2]string{{"k", fmt.Sprintf("gone-%d-%d", w, i)}})
			}
		}()
	}
	wg.Wait()
	m := scrape(t, r.http)
	if up := m.value(t, "sluice_store_up"); up != 1 {
		t.Fatalf("after 300 abandoned requests sluice_store_up is %v, want 1 (the breaker opened)", up)
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if got := r.decide(t, "abuse", 1, [][2]string{{"k", "after"}}); got != want {
			t.Fatalf("request %d after the abandoned ones: %d, want %d (Redis deciding, not allow's policy)", i+1, got, want)
		}
	}
}
