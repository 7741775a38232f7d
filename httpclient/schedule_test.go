package httpclient

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// TestSecondaryLimitWaitsAMinute: GitHub's secondary rate limit without
// Retry-After is retried after a minute, then two, exactly (virtual time).
func TestSecondaryLimitWaitsAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
		secondary := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(body))
		}
		s := &script{steps: []http.HandlerFunc{secondary, secondary, status(200)}}
		o := fast(s)
		o.MaxDelay = 10 * time.Minute
		resp, err := get(t, NewClient(o))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || s.calls() != 3 {
			t.Fatalf("got %d after %d calls, want 200 after 3", resp.StatusCode, s.calls())
		}
		if d1, d2 := s.at[1].Sub(s.at[0]), s.at[2].Sub(s.at[1]); d1 != time.Minute || d2 != 2*time.Minute {
			t.Errorf("retried after %v and %v, want 1m and 2m", d1, d2)
		}
	})
}

// TestBackoffScheduleWithoutRetryAfter: a bare 429 is retried on the
// configured backoff schedule, step for step, while AIMD lowers the host's
// rate alongside (the adaptive default); every attempt counted reached the
// server.
func TestBackoffScheduleWithoutRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(http.StatusTooManyRequests)}}
		attempts := 0
		o := Options{Transport: handlerTransport{s}, MaxAttempts: 6, Backoff: backoff.Exponential{Base: 500 * time.Millisecond},
			Observer: ObserverFunc(func(e Event) {
				if e.Kind == Attempt {
					attempts++
				}
			})}
		resp, err := get(t, NewClient(o))
		if err == nil {
			resp.Body.Close()
			t.Fatal("want an error after 6 attempts")
		}
		if s.calls() != 6 || attempts != 6 {
			t.Fatalf("%d calls, %d attempts counted; want 6 and 6 (%v)", s.calls(), attempts, err)
		}
		// Exponential from 500 ms: the delay before retry k is 500ms·2^k.
		for i := 1; i < 6; i++ {
			if got, want := s.at[i].Sub(s.at[i-1]), 500*time.Millisecond<<i; got != want {
				t.Errorf("gap %d: %v, want %v", i, got, want)
			}
		}
	})
}

// TestRandomDelay: each request waits a random time below RandomDelay
// before it goes (virtual time): the gaps are spread, none reaches it.
func TestRandomDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []http.HandlerFunc{status(200)}}
		o := fast(s)
		o.RandomDelay = time.Second
		c := NewClient(o)
		start := time.Now()
		for range 20 {
			resp, err := get(t, c)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		spread := 0
		prev := start
		for i, at := range s.at {
			gap := at.Sub(prev)
			if gap >= time.Second {
				t.Errorf("request %d waited %v, want under 1s", i, gap)
			}
			if gap > 0 {
				spread++
			}
			prev = at
		}
		if spread < 15 {
			t.Errorf("%d of 20 requests waited at all, want nearly all", spread)
		}
	})
}

// TestGiveUpKeepsLastAnswer: when retries run out, the error carries the
// last answer: its status, header and the start of its body, bounded.
func TestGiveUpKeepsLastAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("x", MaxErrorBody+10)
		s := &script{steps: []http.HandlerFunc{
			status(http.StatusServiceUnavailable, "Retry-After", "1"),
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("X-Reason", "maintenance")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte("down for maintenance " + big))
			},
		}}
		o := fast(s)
		o.MaxAttempts = 2
		_, err := get(t, NewClient(o))
		se, ok := errors.AsType[*StatusError](err)
		if !ok {
			t.Fatalf("error %v, want a StatusError", err)
		}
		if se.StatusCode != 503 || se.Header.Get("X-Reason") != "maintenance" || !strings.HasPrefix(string(se.Body), "down for maintenance") ||
			len(se.Body) != MaxErrorBody || !se.Truncated {
			t.Errorf("StatusError %d %q, body %d bytes (truncated %v), want the last answer's, %d bytes", se.StatusCode, se.Header.Get("X-Reason"), len(se.Body), se.Truncated, MaxErrorBody)
		}
	})
}
