package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkPrefetchHotKey decides one hot key on the shared standalone
// server, exact (Store.Apply, one script call a decision, batched) and
// prefetched (Prefetch.Apply with the default options), side by side, with 64
// concurrent callers. Besides time and allocations it reports decisions/s
// (wall clock) and redis-server's CPU time per decision (INFO cpu). The
// limits: 10^9 a second (never reached: the slice is what the key needs in
// a TTL), 10^6 a second (largest slice 1000) and 10^5 a second (largest
// slice 100, and the key is held at its limit).
func BenchmarkPrefetchHotKey(b *testing.B) {
	e := standalone(b)
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		for _, rate := range []int64{1e9, 1e6, 1e5} {
			lim := ratelimit.Limit{Rate: rate, Period: time.Second}
			for _, mode := range []string{"exact", "prefetched"} {
				b.Run(alg.String()+"/"+ratelimit.Limit.String(lim)+"/"+mode, func(b *testing.B) {
					s := newStore(b, e, redisstore.Options{Timeout: time.Second})
					var st ratelimit.Store = s
					if mode == "prefetched" {
						l, err := redisstore.NewPrefetch(s, redisstore.PrefetchOptions{})
						if err != nil {
							b.Fatal(err)
						}
						defer l.Close()
						st = l
					}
					req := ratelimit.Request{Key: "hot", Limit: lim, Algorithm: alg, N: 1}
					ctx := context.Background()
					b.ReportAllocs()
					b.SetParallelism(max(1, 64/runtimeProcs()))
					done := serverCost(b, e, s)
					calls0 := s.Stats().ScriptCalls
					start := time.Now()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := st.Apply(ctx, req); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
					b.ReportMetric(float64(s.Stats().ScriptCalls-calls0)/float64(b.N), "scripts/op")
					done()
				})
			}
		}
	}
}
