package httpclient

import (
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/hostlimit"
	"github.com/sluicehq/sluice/internal/testharness/envoystyle"
)

// TestEnvoyStyleRealServer: against an envoyproxy/ratelimit-style server
// (package envoystyle) over loopback (its window aligned to the epoch, its
// reset in rounded-up seconds, a bare 429), the client sends each window's quota as it comes
// and nothing is refused: a bare 429 would cost a backoff step each.
func TestEnvoyStyleRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: up to 3 windows of 2 s")
	}
	t.Parallel()
	srv := &envoystyle.Server{Limit: 5, Window: 2 * time.Second}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := NewClient(Options{Concurrency: 4})
	failed := fetchAll(t, c, hs.URL, 12)
	if ok, refused := srv.Counts(); failed != 0 || refused != 0 || ok != 12 {
		t.Errorf("%d failed, %d refused, %d answered; want 0, 0, 12", failed, refused, ok)
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
				srv := &envoystyle.Server{Limit: 5, Window: 2 * time.Second}
				o := Options{Transport: handlerTransport{srv}, Concurrency: 4}
				if mode == "spend" {
					o.BudgetMode = hostlimit.BudgetSpend
				}
				start := time.Now()
				failed := fetchAll(t, NewClient(o), "http://envoy.example", 12)
				el := time.Since(start)
				if ok, refused := srv.Counts(); failed != 0 || refused != 0 || ok != 12 {
					t.Errorf("%d failed, %d refused, %d answered; want 0, 0, 12", failed, refused, ok)
				}
				if schedule := 4 * time.Second; el < schedule || el > schedule+100*time.Millisecond {
					t.Errorf("done after %v, want the schedule %v (+100 ms)", el, schedule)
				}
			})
		})
	}
}
