package overload

import (
	"context"
	"math"
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

// TestRunHTTP runs the HTTP model briefly with two contenders: a row per
// contender and phase, the reference's goodput ratio 1, and some goodput
// at 0.5x for both.
func TestRunHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 s of real time")
	}
	cs := sim.OverloadContenders()
	res, err := RunHTTP(context.Background(), HTTPOptions{Work: 200 * time.Microsecond, Phase: 200 * time.Millisecond, Timeout: 50 * time.Millisecond, Retries: 1, Measure: 100 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Contenders: []sim.OverloadContender{cs[1], cs[2]}})
	if err != nil {
		t.Fatal(err)
	}
	rows := res.Rounds[0]
	if len(res.Rounds) != 1 || len(rows) != 2*len(HTTPPhases) {
		t.Fatalf("%d rounds, %d rows; want 1, %d", len(res.Rounds), len(rows), 2*len(HTTPPhases))
	}
	for _, r := range rows {
		// A 200 ms phase in which the reference completed nothing (a
		// loaded machine, 50 ms deadlines) has no reference: NaN, not 1.
		if r.Limiter == sim.OracleName && r.GoodputRatio != 1 && !(r.Goodput == 0 && math.IsNaN(r.GoodputRatio)) {
			t.Errorf("oracle at %s: goodput ratio %v (goodput %v/s)", r.Phase, r.GoodputRatio, r.Goodput)
		}
		if r.Phase == "0.5x" && !(r.Goodput > 0) {
			t.Errorf("%s: no goodput at 0.5x", r.Limiter)
		}
	}
	med := Medians([][]Row{rows, rows})
	if len(med) != len(rows) || med[0].Rounds != 2 || med[0].Goodput != rows[0].Goodput {
		t.Errorf("medians of a round twice: %+v, want the round's rows", med[:1])
	}
}

// TestBeaten: a peer better on both goodput and p99 than a sluice
// limiter is named; one better on one of them only, or the reference, is
// not.
func TestBeaten(t *testing.T) {
	rows := []Row{
		{Model: "io", Limiter: "sluice-vegas", Phase: "2x", GoodputRatio: 1.00, P99Ratio: 1.2},
		{Model: "io", Limiter: "peer-a", Phase: "2x", GoodputRatio: 1.01, P99Ratio: 1.1},
		{Model: "io", Limiter: "peer-b", Phase: "2x", GoodputRatio: 1.05, P99Ratio: 1.3},
		{Model: "io", Limiter: sim.OracleName, Phase: "2x", GoodputRatio: 1.1, P99Ratio: 1.0},
		{Model: "io", Limiter: "peer-a", Phase: "5x", GoodputRatio: 0.9, P99Ratio: 1.0},
	}
	b := Beaten(rows)
	if len(b) != 1 || b[0].Peer != "peer-a" || b[0].Phase != "2x" || b[0].Sluice != "sluice-vegas" {
		t.Errorf("Beaten = %+v, want peer-a over sluice-vegas at 2x alone", b)
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
