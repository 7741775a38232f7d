package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestLeanMatchesMemstore checks that the lean design study reports what
// memstore's GCRA reports, decision for decision, so that its speed is not
// bought with different answers.
func TestLeanMatchesMemstore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range 50 {
		lim := ratelimit.Limit{Rate: 1 + rng.Int64N(100), Period: time.Duration(1+rng.Int64N(5)) * time.Second, Burst: 1 + rng.Int64N(20)}
		now := time.Unix(1_800_000_000, 0)
		ms := memstore.New(memstore.Options{Now: func() time.Time { return now }, SweepInterval: -1})
		lean := newLeanStore(0, lim)
		lean.testNow = func() int64 { return now.UnixNano() }
		for i := range 500 {
			now = now.Add(time.Duration(rng.Int64N(int64(lim.Interval()) * 2)))
			key := fmt.Sprint("k", rng.IntN(3))
			n := 1 + rng.Int64N(lim.Burst)
			want, err := ms.Apply(context.Background(), ratelimit.Request{Key: key, Limit: lim, N: n})
			if err != nil {
				t.Fatal(err)
			}
			var got ratelimit.Decision
			lean.take(key, n, &got)
			if got != want {
				t.Fatalf("case %d step %d (%v, n=%d): lean %+v, memstore %+v", c, i, lim, n, got, want)
			}
		}
		ms.Close()
		lean.Close()
	}
}
