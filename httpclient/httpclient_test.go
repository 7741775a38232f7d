package httpclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
)

const url = "http://api.example/x"

// fast are options for tests: a fixed rate high enough not to matter.
func fast(h http.Handler) Options {
	return Options{Transport: handlerTransport{h}, Rate: 1000, Burst: 100, Ramp: -1}
}

func get(t *testing.T, c *http.Client) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	return c.Do(req)
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(429, "Retry-After", "2"), status(200)}}
		c := NewClient(fast(s))
		t0 := time.Now()
		resp, err := get(t, c)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || s.calls() != 2 || s.at[1].Sub(t0) != 2*time.Second {
			t.Errorf("got %d after %d calls, retry at %v, want 200 after 2 calls, retry at 2s", resp.StatusCode, s.calls(), s.at[1].Sub(t0))
		}
	})
}

// TestGiveUp: the 429 guide's caps: 7 attempts, then an error upstream that says
// how many and what the last answer was.
func TestGiveUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(429)}}
		o := fast(s)
		o.NoBreaker = true
		c := NewClient(o)
		t0 := time.Now()
		_, err := get(t, c)
		want := `Get "http://api.example/x": retry: gave up after 7 attempts: httpclient: 429 Too Many Requests`
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v, want %s", err, want)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 429 || !errors.Is(err, retry.ErrExhausted) {
			t.Errorf("err = %#v, want a StatusError 429 and ErrExhausted", err)
		}
		if s.calls() != 7 {
			t.Errorf("calls = %d, want 7", s.calls())
		}
		// Never retried at once: each wait at least half the recommended ceiling.
		for i := 1; i < s.calls(); i++ {
			if w, lo := s.at[i].Sub(s.at[i-1]), 500*time.Millisecond<<(i-1); w < lo {
				t.Errorf("wait before retry %d = %v, want at least %v", i, w, lo)
			}
		}
		if el := time.Since(t0); el > 64*time.Second {
			t.Errorf("gave up after %v, want within the schedule's 64 s", el)
		}
	})
}

func TestRetryAfterTooLong(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(503, "Retry-After", "3600")}}
		c := NewClient(fast(s))
		t0 := time.Now()
		_, err := get(t, c)
		if !errors.Is(err, retry.ErrDelayTooLong) || !strings.Contains(err.Error(), "1h0m0s") {
			t.Fatalf("err = %v, want ErrDelayTooLong naming 1h0m0s", err)
		}
		if s.calls() != 1 || time.Since(t0) != 0 {
			t.Errorf("%d calls in %v, want 1, at once", s.calls(), time.Since(t0))
		}
	})
}

// TestPausedHostFailsFast: after a Retry-After longer than MaxDelay, the
// host is paused; later requests fail at once with the delay, instead of
// waiting an hour for it.
func TestPausedHostFailsFast(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(429, "Retry-After", "3600"), status(200)}}
		c := NewClient(fast(s))
		t0 := time.Now()
		for i := range 2 {
			_, err := get(t, c)
			if !errors.Is(err, retry.ErrDelayTooLong) {
				t.Fatalf("request %d: err = %v, want ErrDelayTooLong", i+1, err)
			}
			if i == 1 && !strings.Contains(err.Error(), "paused for another 1h0m0s") {
				t.Errorf("request 2: err = %v, want it to say the host is paused", err)
			}
		}
		if s.calls() != 1 || time.Since(t0) != 0 {
			t.Errorf("%d calls in %v, want 1, at once", s.calls(), time.Since(t0))
		}
	})
}

func TestReplay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tests := []struct {
			name   string
			method string
			key    string
			body   func() io.Reader
			calls  int
			code   int
		}{
			{"GET", "GET", "", nil, 2, 200},
			{"PUT with a rewindable body", "PUT", "", func() io.Reader { return strings.NewReader("payload") }, 2, 200},
			{"POST", "POST", "", func() io.Reader { return strings.NewReader("payload") }, 1, 503},
			{"POST with Idempotency-Key", "POST", "k1", func() io.Reader { return bytes.NewReader([]byte("payload")) }, 2, 200},
			{"PUT with a body that cannot rewind", "PUT", "", func() io.Reader { return io.MultiReader(strings.NewReader("payload")) }, 1, 503},
		}
		for _, tt := range tests {
			s := &script{steps: []http.HandlerFunc{status(503, "Retry-After", "1"), status(200)}}
			c := NewClient(fast(s))
			var body io.Reader
			if tt.body != nil {
				body = tt.body()
			}
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, url, body)
			if tt.key != "" {
				req.Header.Set("Idempotency-Key", tt.key)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != tt.code || s.calls() != tt.calls {
				t.Errorf("%s: %d after %d calls, want %d after %d", tt.name, resp.StatusCode, s.calls(), tt.code, tt.calls)
			}
			if tt.body != nil {
				for i, b := range s.body {
					if b != "payload" {
						t.Errorf("%s: call %d body %q, want %q", tt.name, i+1, b, "payload")
					}
				}
			}
		}
	})
}

func TestBlocksNotRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		challenge := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(429)
			io.WriteString(w, "<html><body>Please complete the CAPTCHA to continue"+strings.Repeat(".", 10000)+"</body></html>")
		}
		for _, h := range []http.HandlerFunc{status(403), challenge, status(429, "Cf-Mitigated", "challenge"), status(404)} {
			s := &script{steps: []http.HandlerFunc{h}}
			c := NewClient(fast(s))
			resp, err := get(t, c)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if s.calls() != 1 {
				t.Errorf("%d: %d calls, want 1 (not retried)", resp.StatusCode, s.calls())
			}
			if resp.StatusCode == 429 && strings.Contains(string(b), "CAPTCHA") && len(b) < 10000 {
				t.Errorf("challenge body truncated to %d bytes after the peek", len(b))
			}
		}
	})
}

func TestClassify(t *testing.T) {
	t.Parallel()
	resp := func(code int, ctype, body string) *http.Response {
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body))}
	}
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want adaptive.Signal
	}{
		{"200", resp(200, "", ""), nil, adaptive.Success},
		{"404", resp(404, "", ""), nil, adaptive.Success},
		{"429", resp(429, "text/plain", "slow down"), nil, adaptive.Throttled},
		{"nginx 429 page", resp(429, "text/html", "<html><head><title>429 Too Many Requests</title></head></html>"), nil, adaptive.Throttled},
		{"429 captcha page", resp(429, "text/html", "<div class=g-recaptcha>"), nil, adaptive.Block},
		{"503 challenge", resp(503, "text/html", `<script src="/cdn-cgi/challenge-platform/x.js">`), nil, adaptive.Block},
		{"503", resp(503, "", ""), nil, adaptive.Throttled},
		{"502", resp(502, "", ""), nil, adaptive.Overloaded},
		{"403", resp(403, "", ""), nil, adaptive.Block},
		{"timeout", nil, context.DeadlineExceeded, adaptive.Timeout},
		{"refused", nil, errors.New("connection refused"), adaptive.Neutral},
	}
	for _, tt := range tests {
		if got := Classify(tt.resp, tt.err); got != tt.want {
			t.Errorf("Classify(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestBreakerOpens: sustained 429s open the host's breaker; then calls fail
// fast with an error matching breaker.ErrOpen.
func TestBreakerOpens(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(429)}}
		var changes []string
		o := fast(s)
		o.MaxAttempts = 1
		o.Backoff = backoff.Constant(time.Second)
		o.Breaker = breaker.Options{Threshold: 3}
		o.Observer = ObserverFunc(func(e Event) {
			if e.Kind == BreakerChange {
				changes = append(changes, e.From.String()+"->"+e.To.String())
			}
		})
		c := NewClient(o)
		for range 3 {
			resp, err := get(t, c)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		_, err := get(t, c)
		if !errors.Is(err, breaker.ErrOpen) || !strings.Contains(err.Error(), "api.example") {
			t.Fatalf("4th call: err = %v, want breaker.ErrOpen naming the host", err)
		}
		if s.calls() != 3 || len(changes) != 1 || changes[0] != "closed->open" {
			t.Errorf("calls = %d, transitions %v, want 3 and [closed->open]", s.calls(), changes)
		}
	})
}

// TestBudget: a host that fails everything stops receiving retries.
func TestBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(502)}}
		o := fast(s)
		o.NoBreaker = true
		o.Backoff = backoff.Constant(time.Millisecond)
		o.Budget = retry.BudgetOptions{Capacity: 5}
		c := NewClient(o)
		var errs []error
		for range 4 {
			_, err := get(t, c)
			errs = append(errs, err)
		}
		// 7 attempts would be 28 calls; the budget allows 4 + 5 retries.
		if s.calls() != 9 || !errors.Is(errs[3], retry.ErrBudgetExhausted) {
			t.Errorf("calls = %d, last err %v, want 9 and ErrBudgetExhausted", s.calls(), errs[3])
		}
	})
}

func TestCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(429, "Retry-After", "30")}}
		c := NewClient(fast(s))
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(5*time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		t0 := time.Now()
		_, err := c.Do(req)
		if !errors.Is(err, context.Canceled) || time.Since(t0) != 5*time.Second {
			t.Errorf("err = %v after %v, want context.Canceled after 5s", err, time.Since(t0))
		}
	})
}

// TestNoParallelRetries: eight requests in flight all get a 429; the host
// pauses once, and after the pause they go one at a time, not all at once.
func TestNoParallelRetries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		first := true
		var inflight, peakAfter int
		gate := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			inflight++
			after := !first
			if after {
				peakAfter = max(peakAfter, inflight)
			}
			mu.Unlock()
			if !after {
				<-gate // hold the first wave together
			}
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			inflight--
			mu.Unlock()
			if !after {
				status(429, "Retry-After", "1")(w, r)
				return
			}
			status(200)(w, r)
		})
		o := Options{Transport: handlerTransport{h}, Rate: 1000, Burst: 100, Concurrency: 8, Ramp: 4 * time.Second}
		var pauses int
		o.Observer = ObserverFunc(func(e Event) {
			if e.Kind == Pause {
				mu.Lock()
				pauses++
				mu.Unlock()
			}
		})
		c := NewClient(o)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				resp, err := get(t, c)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		synctest.Wait()
		mu.Lock()
		first = false
		mu.Unlock()
		close(gate)
		wg.Wait()
		if pauses != 1 {
			t.Errorf("pauses = %d, want 1 for one wave of 429s", pauses)
		}
		if peakAfter > 2 {
			t.Errorf("retries in flight at once = %d, want them spread by the ramp (<= 2)", peakAfter)
		}
	})
}

// TestThrottledServer: a token-bucket server, driven by many concurrent
// requests, in a synctest bubble: all complete, and few 429s.
func TestThrottledServer(t *testing.T) {
	t.Parallel()
	for _, ra := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			srv := newThrottle(t, ratelimit.Limit{Rate: 20, Period: time.Second, Burst: 5}, ra)
			c := NewClient(Options{Transport: handlerTransport{srv}, Concurrency: 4})
			var wg sync.WaitGroup
			var failed sync.Map
			for i := range 200 {
				wg.Go(func() {
					resp, err := get(t, c)
					if err != nil {
						failed.Store(i, err)
						return
					}
					resp.Body.Close()
				})
			}
			wg.Wait()
			failed.Range(func(k, v any) bool { t.Errorf("request %v: %v", k, v); return true })
			if n := srv.count(429); n > 20 {
				t.Errorf("Retry-After %v: %d 429s for 200 requests, want at most 20", ra, n)
			}
			t.Logf("Retry-After %v: 200 OK %d, 429 %d, rate now %.1f/s", ra, srv.count(200), srv.count(429), c.Transport.(*Transport).Hosts()[0].Rate)
		})
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, bb := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", handlerTransport{ok}},
		{"sluice", New(Options{Transport: handlerTransport{ok}, Rate: 1e9, Burst: 1 << 30, Concurrency: 1 << 20})},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			for b.Loop() {
				resp, err := bb.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
