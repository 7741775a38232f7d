package httpclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// resourceServer announces two budgets as GitHub does: "search" for
// /search/..., "core" for the rest, each a fixed window of its own
// (X-RateLimit-Limit, -Remaining, -Reset, -Used, -Resource), and a 403
// when one is spent.
type resourceServer struct {
	limit  map[string]int
	window time.Duration

	mu    sync.Mutex
	start time.Time
	idx   time.Duration // the window's index
	used  map[string]int
	over  int
	at    map[string][]time.Time // arrivals of the requests each took
}

func newResourceServer(search, core int, window time.Duration) *resourceServer {
	return &resourceServer{limit: map[string]int{"search": search, "core": core}, window: window,
		used: map[string]int{}, at: map[string][]time.Time{}}
}

func (s *resourceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res := "core"
	if strings.HasPrefix(r.URL.Path, "/search/") {
		res = "search"
	}
	s.mu.Lock()
	now := time.Now()
	if s.start.IsZero() {
		s.start = now
	}
	idx := now.Sub(s.start) / s.window
	if idx != s.idx {
		s.idx, s.used = idx, map[string]int{}
	}
	ok := s.used[res] < s.limit[res]
	if ok {
		s.used[res]++
		s.at[res] = append(s.at[res], now)
	} else {
		s.over++
	}
	used := s.used[res]
	s.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit[res]))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.limit[res]-used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.start.Add((idx+1)*s.window).Unix(), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Resource", res)
	if !ok {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"API rate limit exceeded"}`)
	}
}

func (s *resourceServer) arrivals(res string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[res]...)
}

func (s *resourceServer) refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.over
}

func fetch(ctx context.Context, c *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}

// paths are a request of each resource of resourceServer.
var paths = map[string]string{"search": "/search/issues?q=x", "core": "/repos/o/r"}

// TestBudgetsPerResource: a server that keeps one budget per resource
// (GitHub's core and search) is paced per resource: with one spent, the
// other's requests all go at once (virtual time), the spent one's wait
// for its reset, and none is refused.
func TestBudgetsPerResource(t *testing.T) {
	for _, spent := range []string{"search", "core"} {
		other := map[string]string{"search": "core", "core": "search"}[spent]
		t.Run(spent+" spent", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newResourceServer(100, 100, time.Minute)
				srv.limit[spent] = 3
				c := NewClient(Options{Transport: handlerTransport{srv}, Concurrency: 4})
				ctx := t.Context()
				base := "http://api.example"
				// One request of each teaches the client the routes.
				for _, res := range []string{spent, other} {
					if err := fetch(ctx, c, base+paths[res]); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				var wg sync.WaitGroup
				for range 4 { // 2 remain: 2 go, 2 wait for the reset
					wg.Go(func() {
						if err := fetch(ctx, c, base+paths[spent]); err != nil {
							t.Error(err)
						}
					})
				}
				synctest.Wait()
				for range 20 {
					if err := fetch(ctx, c, base+paths[other]); err != nil {
						t.Fatal(err)
					}
				}
				for i, at := range srv.arrivals(other)[1:] {
					if d := at.Sub(start); d != 0 {
						t.Errorf("%s request %d went at %v, want 0 (the %s budget is spent, not the %s one)", other, i, d, spent, other)
					}
				}
				wg.Wait()
				if got := len(srv.arrivals(spent)); got != 5 {
					t.Fatalf("%d %s requests taken, want 5", got, spent)
				}
				if last := srv.arrivals(spent)[4]; last.Before(srv.start.Add(time.Minute)) {
					t.Errorf("the last %s request went at %v, before the reset", spent, last.Sub(srv.start))
				}
				if n := srv.refused(); n != 0 {
					t.Errorf("%d refused, want none", n)
				}
			})
		})
	}
}

// TestBudgetsPerResourceRealServer: the same over a real loopback server,
// with the spent budget's reset an hour away: the other resource's
// requests are answered while the spent one's wait.
func TestBudgetsPerResourceRealServer(t *testing.T) {
	t.Parallel()
	srv := newResourceServer(3, 100, time.Hour)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := NewClient(Options{Concurrency: 4})
	ctx := t.Context()
	for _, res := range []string{"search", "core"} {
		if err := fetch(ctx, c, hs.URL+paths[res]); err != nil {
			t.Fatal(err)
		}
	}
	// Spend search, then queue two more behind its reset.
	for range 2 {
		if err := fetch(ctx, c, hs.URL+paths["search"]); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { fetch(wctx, c, hs.URL+paths["search"]) })
	}
	// Core is not held by search's reset: with one budget per host these
	// would wait the hour (the guard fails them long before).
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	defer gcancel()
	for i := range 20 {
		if err := fetch(gctx, c, hs.URL+paths["core"]); err != nil {
			t.Fatalf("core request %d: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	if n, s := len(srv.arrivals("core")), len(srv.arrivals("search")); n != 21 || s != 3 {
		t.Errorf("%d core and %d search requests taken, want 21 and 3", n, s)
	}
	if n := srv.refused(); n != 0 {
		t.Errorf("%d refused, want none", n)
	}
}

// TestSpentResourceDoesNotPauseHost: a refusal by a named budget that is
// spent (search, its reset an hour away: the client had not seen it yet)
// holds that budget's routes, not the host: core requests go at once.
func TestSpentResourceDoesNotPauseHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newResourceServer(0, 100, time.Hour)
		c := NewClient(Options{Transport: handlerTransport{srv}, Concurrency: 4})
		ctx := t.Context()
		base := "http://api.example"
		if err := fetch(ctx, c, base+paths["core"]); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := fetch(ctx, c, base+paths["search"]); err == nil {
			t.Fatal("search went through a spent budget")
		}
		for i := range 10 {
			if err := fetch(ctx, c, base+paths["core"]); err != nil {
				t.Fatalf("core request %d: %v", i, err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("core requests done after %v, want at once", d)
		}
		if n := srv.refused(); n != 1 {
			t.Errorf("%d refused, want the one search request", n)
		}
	})
}
