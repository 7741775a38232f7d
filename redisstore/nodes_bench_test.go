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

// BenchmarkApplyCluster measures 64 concurrent callers over 100 000 keys
// on the shared 3-master cluster: the keys of a batch span many slots, so
// it goes as one script call per node (nodes.go). It reports the nodes'
// CPU time per decision (redis-µs/op, INFO cpu summed over the nodes) and
// the mean batch.
func BenchmarkApplyCluster(b *testing.B) {
	e := cluster(b)
	lim := ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 1000}
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		b.Run(alg.String()+"/parallel64", func(b *testing.B) {
			s := newStore(b, e, redisstore.Options{})
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtimeProcs()))
			ctx := context.Background()
			cpu0, st0 := clusterCPU(b, e), s.Stats()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
				for pb.Next() {
					if _, err := s.Apply(ctx, ratelimit.Request{Key: strconv.Itoa(rng.IntN(100000)), Limit: lim, Algorithm: alg, N: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			cpu, st := clusterCPU(b, e)-cpu0, s.Stats()
			b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "redis-µs/op")
			if calls := st.ScriptCalls - st0.ScriptCalls; calls > 0 {
				b.ReportMetric(float64(st.Requests-st0.Requests)/float64(calls), "batch")
			}
		})
	}
}

// clusterCPU returns the CPU time (user and system) of every node e's
// client knows.
func clusterCPU(b *testing.B, e env) time.Duration {
	b.Helper()
	var total float64
	for addr, node := range e.client.Nodes() {
		info, err := node.Do(context.Background(), node.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			b.Fatalf("INFO cpu of %s: %v", addr, err)
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu of %s: %s: %v", addr, line, err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
