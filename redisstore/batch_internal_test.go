package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestSecondFlightWaitsForAFill checks the batcher's rule for a second
// call in flight: with one call out (its server paused), a few queued
// requests wait for it to return; a quarter of MaxBatch goes out at once.
func TestSecondFlightWaitsForAFill(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.URL(), Options{Timeout: 10 * time.Second, Pipeline: 2, MaxBatch: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.batch
	if b.minFill != 10 {
		t.Fatalf("minFill = %d with MaxBatch 40, want 10", b.minFill)
	}
	state := func() (flying, queued int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.flying), b.queued
	}
	waitFor := func(what string, ok func(flying, queued int) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			f, q := state()
			if ok(f, q) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d in flight, %d queued", what, f, q)
			}
		}
	}
	var wg sync.WaitGroup
	apply := func(n int) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := ratelimit.Request{Key: "k" + string(rune('a'+i)), Limit: ratelimit.PerSecond(100), N: 1}
				if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
					t.Errorf("Apply: %+v, %v", d, err)
				}
			}()
		}
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	apply(1)
	waitFor("the lone request to go out", func(f, q int) bool { return f == 1 && q == 0 })
	apply(4)
	waitFor("four requests to queue", func(f, q int) bool { return q == 4 })
	time.Sleep(50 * time.Millisecond)
	if f, q := state(); f != 1 || q != 4 {
		t.Fatalf("with 4 queued (fewer than 10): %d in flight, %d queued; want 1 and 4", f, q)
	}
	apply(6)
	waitFor("a second flight of 10", func(f, q int) bool { return f == 2 && q == 0 })
	srv.Resume()
	resumed = true
	wg.Wait()
}

// TestReadsLegacyFor checks how long a store looks under readable names:
// from its start, for the grace and twice what a state of the request's
// limit lasts.
func TestReadsLegacyFor(t *testing.T) {
	s, err := newStore(false, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	minute, day := ratelimit.PerMinute(5), ratelimit.Limit{Rate: 5, Period: 24 * time.Hour}
	slowBurst := ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 1000} // a 1000-minute bucket
	for _, tc := range []struct {
		since time.Duration
		lim   ratelimit.Limit
		want  bool
	}{
		{0, minute, true},
		{legacyGrace + time.Minute, minute, true},
		{legacyGrace + 3*time.Minute, minute, false},
		{legacyGrace + 3*time.Minute, day, true},
		{legacyGrace + 49*time.Hour, day, false},
		{legacyGrace + 3*time.Minute, slowBurst, true},
		{legacyGrace + 2001*time.Minute, slowBurst, false},
		{100 * 24 * time.Hour, ratelimit.Limit{Rate: 1, Period: ratelimit.MaxWindow}, true},
	} {
		s.started = time.Now().Add(-tc.since)
		if got := s.readsLegacy(tc.lim.Normalize()); got != tc.want {
			t.Errorf("%v after the start, %v: %v, want %v", tc.since, tc.lim, got, tc.want)
		}
	}
}
