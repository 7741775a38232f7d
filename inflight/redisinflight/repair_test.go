package redisinflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
	"github.com/sluicehq/sluice/inflight/redisinflight"
)

// TestLostCounter: when the counter key is lost while the set of leases
// remains (evicted under memory pressure, deleted by hand), every script
// recounts it from the members instead of undercounting: no request is
// admitted over the cap, and a release frees only its own weight.
func TestLostCounter(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := inflighttest.NewClock(inflighttest.Epoch)
		s := newStore(t, e, redisinflight.Options{Now: c.Now})
		z, w := s.Keys("lost")
		drop := func() {
			if err := e.client.Do(ctx, e.client.B().Del().Key(w).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		req := func(weight int64) inflight.Request {
			return inflight.Request{Key: "lost", Cap: 6, Weight: weight, TTL: time.Minute}
		}
		a, _, _ := s.Acquire(ctx, req(2))
		s.Acquire(ctx, req(3))
		drop()
		if _, d, err := s.Acquire(ctx, req(2)); err != nil || d.Allowed || d.InFlight != 5 {
			t.Errorf("Acquire after the counter was lost = %+v, %v; want denied with 5 in flight", d, err)
		}
		drop()
		if n, err := s.Peek(ctx, "lost"); err != nil || n != 5 {
			t.Errorf("Peek after the counter was lost = %d, %v; want 5", n, err)
		}
		drop()
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Peek(ctx, "lost"); err != nil || n != 3 {
			t.Errorf("Peek after a release with the counter lost = %d, %v; want 3", n, err)
		}
		// The recounted counter expires with the set.
		pz, _ := e.client.Do(ctx, e.client.B().Pttl().Key(z).Build()).AsInt64()
		pw, _ := e.client.Do(ctx, e.client.B().Pttl().Key(w).Build()).AsInt64()
		// Two PTTL reads, each rounded to the millisecond: allow a few.
		if pz <= 0 || pw <= 0 || pw > pz+5 {
			t.Errorf("PTTL set %d ms, counter %d ms; want both positive, the counter's at most the set's (±5 ms)", pz, pw)
		}
	})
}
