package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkApply measures decisions against the shared standalone server:
// one caller at a time (the round trip), and 64 concurrent callers (what
// batching and pipelining buy). Besides time and allocations it reports
// redis-server's CPU time per decision (redis-µs/op, from INFO cpu: the
// server's side of the cost, steadier than throughput on a shared machine)
// and the mean batch, the decisions one script call carried. The fixed
// window's one key from the start (CompatWindow -1: what a store writes
// after its compatibility window).
func BenchmarkApply(b *testing.B) {
	e := standalone(b)
	lim := ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 1000}
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		b.Run(alg.String()+"/serial", func(b *testing.B) {
			s := newStore(b, e, redisstore.Options{CompatWindow: -1})
			b.ReportAllocs()
			ctx := context.Background()
			defer serverCost(b, e, s)()
			for i := 0; b.Loop(); i++ {
				if _, err := s.Apply(ctx, ratelimit.Request{Key: strconv.Itoa(i % 10000), Limit: lim, Algorithm: alg, N: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
		if alg == ratelimit.FixedWindow {
			// The same with scripts only: what a lone charge cost before it
			// went as plain commands.
			b.Run(alg.String()+"/serial/scripts-only", func(b *testing.B) {
				s := newStore(b, e, redisstore.Options{ScriptOnly: true})
				b.ReportAllocs()
				ctx := context.Background()
				defer serverCost(b, e, s)()
				for i := 0; b.Loop(); i++ {
					if _, err := s.Apply(ctx, ratelimit.Request{Key: strconv.Itoa(i % 10000), Limit: lim, Algorithm: alg, N: 1}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(alg.String()+"/parallel64", func(b *testing.B) {
			s := newStore(b, e, redisstore.Options{CompatWindow: -1})
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtimeProcs()))
			ctx := context.Background()
			defer serverCost(b, e, s)()
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

// serverCost starts measuring redis-server's CPU time and s's batches; the
// function it returns reports them per decision (b.N of them).
func serverCost(b *testing.B, e env, s *redisstore.Store) func() {
	cpu0, st0 := redisCPU(b, e), s.Stats()
	return func() {
		cpu, st := redisCPU(b, e)-cpu0, s.Stats()
		b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "redis-µs/op")
		if calls := st.ScriptCalls - st0.ScriptCalls; calls > 0 {
			b.ReportMetric(float64(st.Requests-st0.Requests)/float64(calls), "batch")
		}
	}
}

// redisCPU returns the CPU time (user and system) of e's redis-server.
func redisCPU(b *testing.B, e env) time.Duration {
	b.Helper()
	info, err := e.client.Do(context.Background(), e.client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
