package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkApply measures decisions against the shared standalone server:
// one caller at a time (the round trip), and 64 concurrent callers (what
// batching and pipelining buy).
func BenchmarkApply(b *testing.B) {
	e := standalone(b)
	lim := ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 1000}
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		b.Run(alg.String()+"/serial", func(b *testing.B) {
			s := newStore(b, e, redisstore.Options{})
			b.ReportAllocs()
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				if _, err := s.Apply(ctx, ratelimit.Request{Key: strconv.Itoa(i % 10000), Limit: lim, Algorithm: alg, N: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/parallel64", func(b *testing.B) {
			s := newStore(b, e, redisstore.Options{})
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtimeProcs()))
			ctx := context.Background()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
				for pb.Next() {
					if _, err := s.Apply(ctx, ratelimit.Request{Key: strconv.Itoa(rng.IntN(10000)), Limit: lim, Algorithm: alg, N: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
