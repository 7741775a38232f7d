package httpclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
)

// fetchAll gets n URLs of base concurrently with c and reports failures.
func fetchAll(t *testing.T, c *http.Client, base string, n int) (failed int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/item/%d", base, i), nil)
			resp, err := c.Do(req)
			if err != nil {
				bad.Add(1)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	return int(bad.Load())
}

// TestE2EThrottlingServers: real HTTP servers on 127.0.0.1 that limit with
// a memstore token bucket, with and without Retry-After, and one that slows
// down before it throttles: every URL completes, with few 429s.
func TestE2EThrottlingServers(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter bool
		slowdown   time.Duration
	}{
		{"retry-after", true, 0},
		{"no retry-after", false, 0},
		{"slows before throttling", true, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newThrottle(t, ratelimit.Limit{Rate: 40, Period: time.Second, Burst: 5}, tt.retryAfter)
			srv.slowdown = tt.slowdown
			hs := httptest.NewServer(srv)
			t.Cleanup(hs.Close)
			c := NewClient(Options{Concurrency: 8, Adaptive: adaptive.Options{Initial: 10}})
			const n = 80
			start := time.Now()
			failed := fetchAll(t, c, hs.URL, n)
			t.Logf("%d URLs in %v: 200 %d, 429 %d, failed %d, rate %.1f/s", n, time.Since(start).Round(time.Millisecond),
				srv.count(200), srv.count(429), failed, c.Transport.(*Transport).Hosts()[0].Rate)
			if failed != 0 {
				t.Errorf("%d of %d failed", failed, n)
			}
			if got := srv.count(429); got > n/8 {
				t.Errorf("%d 429s for %d URLs, want at most %d", got, n, n/8)
			}
		})
	}
}

// TestE2EBlockingServer: a server that blocks (403, or a 429 challenge
// page) is not retried politely forever: one attempt per URL.
func TestE2EBlockingServer(t *testing.T) {
	t.Parallel()
	for _, h := range []http.HandlerFunc{status(403), status(429, "Cf-Mitigated", "challenge")} {
		var calls atomic.Int64
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			h(w, r)
		}))
		// No waiting but for a slot: no retry scheduled, no pause of the
		// host (counted, not timed).
		var mu sync.Mutex
		kinds := map[EventKind]int{}
		c := NewClient(Options{Rate: 200, Burst: 20, Observer: ObserverFunc(func(e Event) {
			mu.Lock()
			kinds[e.Kind]++
			mu.Unlock()
		})})
		const n = 20
		failed := fetchAll(t, c, hs.URL, n)
		hs.Close()
		if failed != n || calls.Load() != n {
			t.Errorf("blocked: %d failed after %d calls, want %d after %d (no retries)", failed, calls.Load(), n, n)
		}
		mu.Lock()
		if kinds[Retry] != 0 || kinds[Pause] != 0 || kinds[Attempt] != n {
			t.Errorf("blocked: events %v, want %d attempts, no retry, no pause", kinds, n)
		}
		mu.Unlock()
	}
}
