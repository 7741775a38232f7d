package redisinflight_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
)

// BenchmarkAcquireRelease: one request's two round trips (enter, leave),
// serial and from many goroutines (one key each), on the standalone server
// and the cluster.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, mk := range []func(testing.TB) env{standalone, cluster} {
		e := mk(b)
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b, e, redisinflight.Options{})
			req := inflight.Request{Key: "bench", Cap: 100}
			b.ReportAllocs()
			for b.Loop() {
				l, d, err := s.Acquire(ctx, req)
				if err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
				if err := s.Release(ctx, l); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(e.name+"-parallel", func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b, e, redisinflight.Options{})
			var g atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				req := inflight.Request{Key: "bench" + strconv.FormatInt(g.Add(1), 10), Cap: 100}
				for pb.Next() {
					l, d, err := s.Acquire(ctx, req)
					if err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
					if err := s.Release(ctx, l); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
