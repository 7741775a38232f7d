package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Op is one decision by caller i. It returns whether the request was
// admitted.
type Op func(ctx context.Context, rng *rand.Rand) (bool, error)

// Result is one contender's measurement.
type Result struct {
	Name      string
	Decisions int64
	Allowed   int64
	Errors    int64
	Elapsed   time.Duration
	P50, P99  time.Duration
	FirstErr  error
	ServerCPU time.Duration   // redis-server's CPU time during the measurement
	ClientCPU time.Duration   // this process's CPU time during the measurement
	Latencies []time.Duration // every call's, sorted
}

// Merge pools measurements of one contender taken in several slices of
// time: decisions and times add up, and the percentiles are those of every
// call.
func Merge(rs []Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	m := Result{Name: rs[0].Name}
	for _, r := range rs {
		m.Decisions += r.Decisions
		m.Allowed += r.Allowed
		m.Errors += r.Errors
		m.Elapsed += r.Elapsed
		m.ServerCPU += r.ServerCPU
		m.ClientCPU += r.ClientCPU
		m.Latencies = append(m.Latencies, r.Latencies...)
		if m.FirstErr == nil {
			m.FirstErr = r.FirstErr
		}
	}
	slices.Sort(m.Latencies)
	if n := len(m.Latencies); n > 0 {
		m.P50, m.P99 = m.Latencies[n/2], m.Latencies[n*99/100]
	}
	return m
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PerSecond returns decisions per second.
func (r Result) PerSecond() float64 { return float64(r.Decisions) / r.Elapsed.Seconds() }

func (r Result) String() string {
	return fmt.Sprintf("%-32s %8.0f decisions/s  p50 %8v  p99 %8v  CPU/decision server %5.1f µs client %5.1f µs  allowed %5.1f%%  errors %d",
		r.Name, r.PerSecond(), r.P50.Round(time.Microsecond/10), r.P99.Round(time.Microsecond/10),
		r.ServerCPU.Seconds()*1e6/float64(max(1, r.Decisions)), r.ClientCPU.Seconds()*1e6/float64(max(1, r.Decisions)),
		100*float64(r.Allowed)/float64(max(1, r.Decisions)), r.Errors)
}

// Measure runs op from callers goroutines for d and records every call's
// latency.
func Measure(ctx context.Context, name string, callers int, d time.Duration, op Op) Result {
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		mu      sync.Mutex
		all     []time.Duration
		allowed atomic.Int64
		errs    atomic.Int64
		first   atomic.Value
	)
	start := time.Now()
	cpu0 := processCPU()
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 42))
			lat := make([]time.Duration, 0, 1<<14)
			for !stop.Load() {
				t0 := time.Now()
				ok, err := op(ctx, rng)
				lat = append(lat, time.Since(t0))
				if err != nil {
					if errs.Add(1) == 1 {
						first.Store(err)
					}
				} else if ok {
					allowed.Add(1)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}(uint64(i))
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	slices.Sort(all)
	r := Result{Name: name, Decisions: int64(len(all)), Allowed: allowed.Load(), Errors: errs.Load(), Elapsed: elapsed, ClientCPU: cpu, Latencies: all}
	if len(all) > 0 {
		r.P50 = all[len(all)/2]
		r.P99 = all[len(all)*99/100]
	}
	if e, ok := first.Load().(error); ok {
		r.FirstErr = e
	}
	return r
}

// Paired returns, round by round, a's decisions per second over base's:
// the two were measured in the same round, under the same load, so these
// ratios are steadier than a ratio of pooled totals on a machine whose
// speed drifts. Rounds missing from either side are skipped.
func Paired(a, base []Result) []float64 {
	var out []float64
	for i := range min(len(a), len(base)) {
		if b := base[i].PerSecond(); b > 0 && base[i].Decisions > 0 {
			out = append(out, a[i].PerSecond()/b)
		}
	}
	return out
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
