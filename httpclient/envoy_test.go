package httpclient

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/hostlimit"
)

// envoyServer answers as Envoy's rate limit filter in front of
// envoyproxy/ratelimit does with enable_x_ratelimit_headers
// (DRAFT_VERSION_03): a fixed window aligned to the Unix epoch, announced
// in X-RateLimit-Limit ("5, 5;w=2"), -Remaining and -Reset (seconds to
// the window's end, rounded up), and a bare 429 when spent.
type envoyServer struct {
	limit  int
	window time.Duration

	mu          sync.Mutex
	win         int64
	used        int
	ok, refused int
}

func (e *envoyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	e.mu.Lock()
	if win := now.UnixNano() / int64(e.window); win != e.win {
		e.win, e.used = win, 0
	}
	allowed := e.used < e.limit
	if allowed {
		e.used++
		e.ok++
	} else {
		e.refused++
	}
	used := e.used
	end := time.Unix(0, (e.win+1)*int64(e.window))
	e.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", fmt.Sprintf("%d, %d;w=%d", e.limit, e.limit, int64(e.window/time.Second)))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(e.limit-used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(int64((end.Sub(now)+time.Second-1)/time.Second), 10))
	if !allowed {
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// TestEnvoyStyleRealServer: against an envoyproxy/ratelimit-style server
// over loopback (its window aligned to the epoch, its reset in rounded-up
// seconds, a bare 429), the client sends each window's quota as it comes
// and nothing is refused: a bare 429 would cost a backoff step each.
func TestEnvoyStyleRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: up to 3 windows of 2 s")
	}
	t.Parallel()
	srv := &envoyServer{limit: 5, window: 2 * time.Second}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := NewClient(Options{Concurrency: 4})
	failed := fetchAll(t, c, hs.URL, 12)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if failed != 0 || srv.refused != 0 || srv.ok != 12 {
		t.Errorf("%d failed, %d refused, %d answered; want 0, 0, 12", failed, srv.refused, srv.ok)
	}
}

// TestEnvoyStyleSchedule: the same in virtual time, where the schedule is
// exact: 12 requests at 5 per window of 2 s (the clock starts on a
// window's start) need the windows at 0, 2 s and 4 s; each window's
// quota goes at once, so the last request goes just after 4 s (the
// margin after a guessed reset), none refused. Pacing each window's
// quota over it, as before, ended near 6 s.
func TestEnvoyStyleSchedule(t *testing.T) {
	for _, mode := range []string{"pace", "spend"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &envoyServer{limit: 5, window: 2 * time.Second}
				o := Options{Transport: handlerTransport{srv}, Concurrency: 4}
				if mode == "spend" {
					o.BudgetMode = hostlimit.BudgetSpend
				}
				start := time.Now()
				failed := fetchAll(t, NewClient(o), "http://envoy.example", 12)
				el := time.Since(start)
				if failed != 0 || srv.refused != 0 || srv.ok != 12 {
					t.Errorf("%d failed, %d refused, %d answered; want 0, 0, 12", failed, srv.refused, srv.ok)
				}
				if schedule := 4 * time.Second; el < schedule || el > schedule+100*time.Millisecond {
					t.Errorf("done after %v, want the schedule %v (+100 ms)", el, schedule)
				}
			})
		})
	}
}
