package httpclient

import (
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

	"github.com/sluicehq/sluice/adaptive"
)

func TestParseBudget(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name string
		h    http.Header
		want Budget
		ok   bool
	}{
		{"none", h(), Budget{}, false},
		{"ietf, sluice's gateway", h("RateLimit-Policy", `"api";q=100;w=60`, "RateLimit", `"api";r=40;t=30`),
			Budget{Remaining: 40, Reset: 30 * time.Second, Limit: 100, Window: time.Minute, Used: -1, Policy: "api", Source: "ietf"}, true},
		{"ietf, tightest of two", h("RateLimit-Policy", `"burst";q=10;w=1, "day";q=1000;w=86400`, "RateLimit", `"burst";r=9;t=1, "day";r=2;t=3600`),
			Budget{Remaining: 2, Reset: time.Hour, Limit: 1000, Window: 24 * time.Hour, Used: -1, Policy: "day", Source: "ietf"}, true},
		{"ietf, token names and no policy", h("RateLimit", `default;r=0;t=7`),
			Budget{Remaining: 0, Reset: 7 * time.Second, Used: -1, Policy: "default", Source: "ietf"}, true},
		{"ietf, spent wins", h("RateLimit", `"a";r=0;t=1, "b";r=5;t=100`),
			Budget{Remaining: 0, Reset: time.Second, Used: -1, Policy: "a", Source: "ietf"}, true},
		{"draft 7 dictionary", h("RateLimit", `limit=10, remaining=1, reset=7`),
			Budget{Remaining: 1, Reset: 7 * time.Second, Limit: 10, Used: -1, Source: "ietf"}, true},
		{"ietf malformed falls through", h("RateLimit", `"a";r=x`, "X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "5"),
			Budget{Remaining: 3, Reset: 5 * time.Second, Used: -1, Source: "x"}, true},
		{"envoyproxy/ratelimit and drafts 5-6", h("RateLimit-Limit", "100, 100;w=60", "RateLimit-Remaining", "99", "RateLimit-Reset", "59"),
			Budget{Remaining: 99, Reset: 59 * time.Second, Limit: 100, Window: time.Minute, Used: -1, Source: "draft"}, true},
		{"github, epoch seconds", h("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1700000042",
			"X-RateLimit-Used", "5000", "X-RateLimit-Resource", "core"),
			Budget{Remaining: 0, Reset: 42 * time.Second, Limit: 5000, Used: 5000, Policy: "core", Source: "x"}, true},
		{"epoch milliseconds", h("X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "1700000001500"),
			Budget{Remaining: 4, Reset: 1500 * time.Millisecond, Used: -1, Source: "x"}, true},
		{"delta seconds", h("X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "2.5"),
			Budget{Remaining: 4, Reset: 2500 * time.Millisecond, Used: -1, Source: "x"}, true},
		{"reset in the past", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1600000000"),
			Budget{Remaining: 0, Reset: 0, Used: -1, Source: "x"}, true},
		{"discord reset-after", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "1.25"),
			Budget{Remaining: 0, Reset: 1250 * time.Millisecond, Used: -1, Source: "x"}, true},
		{"no reset", h("X-RateLimit-Remaining", "0"), Budget{}, false},
		{"garbage", h("X-RateLimit-Remaining", "lots", "X-RateLimit-Reset", "soon"), Budget{}, false},
		{"negative reset", h("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "-5"), Budget{}, false},
		{"absurd reset clamped", h("RateLimit", `"a";r=1;t=999999999999`),
			Budget{Remaining: 1, Reset: 24 * time.Hour, Used: -1, Policy: "a", Source: "ietf"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseBudget(tt.h, now)
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseBudget = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseBudget(f *testing.F) {
	for _, s := range []string{`"a";r=1;t=2`, `limit=1, remaining=0, reset=3`, "17", "1700000000", "1e400", `"a";r=-1;t=1`, ";;", "\x00"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		now := time.Unix(1_700_000_000, 0)
		for _, h := range []http.Header{
			{"Ratelimit": {a}, "Ratelimit-Policy": {b}},
			{"Ratelimit-Remaining": {a}, "Ratelimit-Reset": {b}},
			{"X-Ratelimit-Remaining": {a}, "X-Ratelimit-Reset": {b}, "X-Ratelimit-Limit": {a}},
		} {
			bd, ok := ParseBudget(h, now)
			if ok && (bd.Remaining < 0 || bd.Reset < 0 || bd.Reset > 24*time.Hour) {
				t.Fatalf("ParseBudget(%v) = %+v out of range", h, bd)
			}
		}
	})
}

func TestClassifyRateLimit403(t *testing.T) {
	resp := func(body string, kv ...string) *http.Response {
		r := &http.Response{StatusCode: 403, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		for i := 0; i < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		return r
	}
	tests := []struct {
		name string
		r    *http.Response
		want adaptive.Signal
	}{
		{"plain 403", resp("Forbidden"), adaptive.Block},
		{"retry-after", resp("", "Retry-After", "60"), adaptive.Throttled},
		{"github primary", resp(`{"message":"API rate limit exceeded for user ID 1."}`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)), adaptive.Throttled},
		{"github secondary, body only", resp(`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`), adaptive.Throttled},
		{"budget left: a real refusal", resp("no", "X-RateLimit-Remaining", "10", "X-RateLimit-Reset", "30"), adaptive.Block},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.r, nil); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
			// The body is still whole for the caller.
			if b, _ := io.ReadAll(tt.r.Body); tt.name == "plain 403" && string(b) != "Forbidden" {
				t.Errorf("body after Classify = %q", b)
			}
		})
	}
}

// windowServer is a fixed-window server that announces its budget, as
// sluice's gateway (IETF fields), GitHub (X-RateLimit-*, 403 when spent)
// and most APIs do.
type windowServer struct {
	limit  int
	window time.Duration
	style  string // "ietf", "x" or "github"

	mu         sync.Mutex
	start      time.Time
	lastWindow int64
	n          int
	ok, over   int
}

func (s *windowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	now := time.Now()
	if s.start.IsZero() {
		s.start = now
	}
	idx := now.Sub(s.start) / s.window
	end := s.start.Add((idx + 1) * s.window)
	if s.curWindow(now) != s.lastWindow {
		s.lastWindow, s.n = s.curWindow(now), 0
	}
	allowed := s.n < s.limit
	if debugWindow {
		fmt.Printf("%6.2f w%d n=%d\n", now.Sub(s.start).Seconds(), s.lastWindow, s.n)
	}
	if allowed {
		s.n++
		s.ok++
	} else {
		s.over++
	}
	remaining := s.limit - s.n
	s.mu.Unlock()
	reset := int64((end.Sub(now) + time.Second - 1) / time.Second)
	switch s.style {
	case "ietf":
		w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"api";q=%d;w=%d`, s.limit, int64(s.window/time.Second)))
		w.Header().Set("RateLimit", fmt.Sprintf(`"api";r=%d;t=%d`, remaining, reset))
		if !allowed {
			w.Header().Set("Retry-After", strconv.FormatInt(reset, 10))
		}
	case "x", "github":
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(end.Add(time.Second-1).Unix(), 10))
		w.Header().Set("X-RateLimit-Used", strconv.Itoa(s.limit-remaining))
	}
	switch {
	case allowed:
		w.WriteHeader(200)
	case s.style == "github":
		w.WriteHeader(403)
		io.WriteString(w, `{"message":"API rate limit exceeded"}`)
	default:
		w.WriteHeader(429)
	}
}

var debugWindow = false

func (s *windowServer) curWindow(now time.Time) int64 { return int64(now.Sub(s.start) / s.window) }

// TestBudgetPacing: against servers that announce their budget, the client
// paces what remains over the window instead of spending it and waiting: no
// refusals, and it takes no longer than the windows the work needs.
func TestBudgetPacing(t *testing.T) {
	for _, style := range []string{"ietf", "x", "github"} {
		t.Run(style, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &windowServer{limit: 20, window: 10 * time.Second, style: style, lastWindow: -1}
				c := NewClient(Options{Transport: handlerTransport{srv}, Concurrency: 4, Adaptive: adaptive.Options{Initial: 50}})
				const n = 60
				start := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				failed := 0
				for i := range n {
					wg.Go(func() {
						req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("http://api.example/%d", i), nil)
						resp, err := c.Do(req)
						if err == nil {
							resp.Body.Close()
						}
						if err != nil || resp.StatusCode != 200 {
							mu.Lock()
							failed++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				el := time.Since(start)
				t.Logf("%s: %d URLs in %v, %d refused, %d failed", style, n, el, srv.over, failed)
				if failed != 0 {
					t.Errorf("%d of %d failed", failed, n)
				}
				// The first answer shows the budget; until then up to
				// Concurrency requests are in flight, which the pace
				// accounts for. Fewer than 1% refused.
				if srv.over*100 >= n {
					t.Errorf("%d of %d requests refused, want < 1%%", srv.over, n)
				}
				// 60 requests at 20 per 10 s need 3 windows; the pace
				// spreads each window's budget over it, so the last ones
				// land near the end of the third, or (virtual time, but
				// goroutine order varies) just past it.
				if el > 35*time.Second {
					t.Errorf("took %v, want at most the 3 windows the work needs", el)
				}
			})
		})
	}
}

// TestGitHubSecondaryLimit: GitHub's 403 with Retry-After (its secondary
// rate limit) is waited out and retried, not reported as a block.
func TestGitHubSecondaryLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{
			status(403, "Retry-After", "60"),
			status(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(90*time.Second).Unix(), 10)),
			status(200),
		}}
		c := NewClient(fast(s))
		t0 := time.Now()
		resp, err := get(t, c)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || s.calls() != 3 {
			t.Fatalf("got %d after %d calls, want 200 after 3", resp.StatusCode, s.calls())
		}
		if d := s.at[1].Sub(t0); d != 60*time.Second {
			t.Errorf("second call after %v, want the 60 s of Retry-After", d)
		}
		if d := s.at[2].Sub(t0); d < 90*time.Second || d > 91*time.Second {
			t.Errorf("third call at %v, want at the reset, 90 s (rounded up to the second)", d)
		}
	})
}

// TestBudgetPacingRealServer: the same over a real loopback server.
func TestBudgetPacingRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	t.Parallel()
	srv := &windowServer{limit: 10, window: time.Second, style: "ietf", lastWindow: -1}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := NewClient(Options{Concurrency: 4, Adaptive: adaptive.Options{Initial: 50}})
	failed := fetchAll(t, c, hs.URL, 30)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if failed != 0 || srv.over > 0 {
		t.Errorf("%d failed, %d refused; want none", failed, srv.over)
	}
}
