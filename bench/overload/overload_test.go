package overload

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/platinummonkey/go-concurrency-limits/core"
	"github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/zeromicro/go-zero/core/load"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/sim"
)

// TestRun runs every contender briefly in real time: the rows are there,
// one per contender and phase, and the oracle is the reference.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 s of real time")
	}
	res, err := Run(context.Background(), Options{Phase: 300 * time.Millisecond, Warmup: 200 * time.Millisecond,
		Bin: 100 * time.Millisecond, Model: sim.IOModel{Capacity: 10, Base: 10 * time.Millisecond, Timeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	n := len(Contenders(10))
	if len(res.Rows) != n*5 {
		t.Fatalf("%d rows, want %d", len(res.Rows), n*5)
	}
	for _, r := range res.Rows {
		if r.Limiter == sim.OracleName && r.GoodputRatio != 1 {
			t.Errorf("oracle at %s: goodput ratio %v", r.Phase, r.GoodputRatio)
		}
	}
	if v := Verdicts(res); len(v) != n || len(v["sluice-gradient"]) != len(Targets) {
		t.Errorf("verdicts %v", v)
	}
}

// BenchmarkAcquireRelease is acquire then release (a success) of every
// limiter through its own API, with limits no goroutine reaches. cpu-ns/op
// is the process's CPU time per operation (in parallel, of both
// goroutines together), steadier than ns/op on a shared machine.
func BenchmarkAcquireRelease(b *testing.B) {
	lo := adaptive.LimiterOptions{Initial: 1000, Max: 1000}
	sg := adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: lo})
	sv := adaptive.NewVegas(adaptive.VegasOptions{LimiterOptions: lo})
	s4 := adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: adaptive.LimiterOptions{Initial: 1000, Max: 1000, Sample: 4}})
	fa := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000, 1000).Build()
	fb := bulkhead.New[any](1000)
	pv := newPlatinum(limit.NewDefaultVegasLimitWithLimit("vegas", 1000, limit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance))
	pg := newPlatinum(func() core.Limit {
		l, err := limit.NewGradient2Limit("gradient2", 1000, 1000, 1, nil, 0.2, 600, limit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}())
	gz := load.NewAdaptiveShedder()
	ctx := context.Background()
	ops := []struct {
		name string
		op   func()
	}{
		{"sluice-gradient", func() {
			if tok, ok := sg.Acquire(); ok {
				tok.Done()
			}
		}},
		{"sluice-gradient-sample4", func() {
			if tok, ok := s4.Acquire(); ok {
				tok.Done()
			}
		}},
		{"sluice-vegas", func() {
			if tok, ok := sv.Acquire(); ok {
				tok.Done()
			}
		}},
		{"failsafe-adaptivelimiter", func() {
			if p, ok := fa.TryAcquirePermit(); ok {
				p.Record()
			}
		}},
		{"failsafe-bulkhead", func() {
			if fb.TryAcquirePermit() {
				fb.ReleasePermit()
			}
		}},
		{"platinummonkey-vegas", func() {
			if l, ok := pv.Acquire(ctx); ok {
				l.OnSuccess()
			}
		}},
		{"platinummonkey-gradient2", func() {
			if l, ok := pg.Acquire(ctx); ok {
				l.OnSuccess()
			}
		}},
		{"gozero-shedder", func() {
			if p, err := gz.Allow(); err == nil {
				p.Pass()
			}
		}},
	}
	for _, o := range ops {
		b.Run(o.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				o.op()
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
		b.Run(o.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o.op()
				}
			})
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
