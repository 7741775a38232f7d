package redisstore_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

// valkey returns a standalone valkey-server of t's own and a client for
// it.
func valkey(t *testing.T) env {
	s := redistest.StartValkey(t)
	return env{name: "valkey", client: sharedClient(t, []string{s.Addr}), addrs: []string{s.Addr}}
}

// TestValkey runs, in both layouts, the conformance suite, the differential test against
// memstore, and a decision on Valkey's own clock against valkey-server:
// the scripts use only what Valkey keeps of Redis (struct, SET with
// EXAT/KEEPTTL, TIME).
func TestValkey(t *testing.T) {
	v := valkey(t)
	for _, l := range []redisstore.Layout{redisstore.LayoutString, redisstore.LayoutPacked} {
		e := v
		e.layout = l
		t.Run(l.String(), func(t *testing.T) { valkeyRuns(t, e) })
	}
}

// valkeyRuns is TestValkey in e's layout.
func valkeyRuns(t *testing.T, e env) {
	t.Run("conformance", func(t *testing.T) {
		ratelimittest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
			return newStore(t, e, redisstore.Options{Now: now})
		})
	})
	t.Run("differential", func(t *testing.T) {
		for _, alg := range ratelimit.Algorithms() {
			rng := rand.New(rand.NewPCG(uint64(alg)+1, *diffSeed))
			for seq := range 5 {
				differential(t, e, alg, rng, seq, 60)
			}
		}
	})
	t.Run("server clock", func(t *testing.T) {
		s := newStore(t, e, redisstore.Options{})
		req := ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(2), Algorithm: ratelimit.GCRA, N: 1}
		for i, want := range []bool{true, true, false} {
			d, err := s.Apply(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != want {
				t.Fatalf("request %d: allowed %v, want %v (%+v)", i, d.Allowed, want, d)
			}
		}
	})
}
