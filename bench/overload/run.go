package overload

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Options configures [Run]. The zero value is the default.
type Options struct {
	Model      sim.IOModel // the zero value: sim's default shrunk to 20 in flight (1000/s), to keep real time cheap
	Warmup     time.Duration
	Phase      time.Duration // 0 means 5 s
	Bin        time.Duration // 0 means 250 ms
	Seed       uint64
	Contenders []sim.OverloadContender // nil means Contenders(Model.Capacity)
	// Progress, when set, is called once a second with the time elapsed
	// and the run's length.
	Progress func(elapsed, total time.Duration)
}

// Run runs every contender at once, in real time, each against its own
// copy of the model with the same arrival draws, and summarizes them as
// sluice sim overload does.
func Run(ctx context.Context, o Options) (*sim.OverloadResult, error) {
	if o.Model.Capacity == 0 {
		o.Model.Capacity = 20
	}
	if o.Model.Base == 0 {
		o.Model.Base = 20 * time.Millisecond
	}
	if o.Warmup == 0 {
		o.Warmup = 3 * time.Second
	}
	if o.Phase <= 0 {
		o.Phase = 5 * time.Second
	}
	if o.Bin <= 0 {
		o.Bin = 250 * time.Millisecond
	}
	if o.Contenders == nil {
		o.Contenders = Contenders(o.Model.Capacity)
	}
	phases := sim.OverloadPhases(o.Warmup, o.Phase)
	end := phases[len(phases)-1].End
	start := time.Now().Add(50 * time.Millisecond)
	runs := make([]*sim.OverloadRun, len(o.Contenders))
	var wg sync.WaitGroup
	for i, c := range o.Contenders {
		wg.Go(func() { runs[i] = runOne(ctx, o, phases, c, start) })
	}
	if o.Progress != nil {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(time.Second)
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-tick.C:
				o.Progress(min(time.Since(start), end), end)
			}
		}
		tick.Stop()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := sim.OverloadSummary(runs, o.Bin, min(2*time.Second, o.Phase/4))
	if err != nil {
		return nil, err
	}
	res.Throughput = o.Model.Throughput(1)
	return res, nil
}

// runOne drives one contender: an arrival loop on the wall clock, a timer
// per admitted request, a sample per bin.
func runOne(ctx context.Context, o Options, phases []sim.OverloadPhase, c sim.OverloadContender, start time.Time) *sim.OverloadRun {
	m := o.Model
	run := sim.NewOverloadRun(c.Name, phases, o.Bin)
	var mu sync.Mutex // guards run, inflight, noise and the admitter's calls
	inflight := 0
	noise := rand.New(rand.NewPCG(o.Seed, 2))
	arrivals := rand.New(rand.NewPCG(o.Seed, 1))
	phaseAt := func(t time.Duration) int {
		for i, p := range phases {
			if t >= p.Start && t < p.End {
				return i
			}
		}
		return len(phases) - 1
	}
	capa := func() int {
		return max(1, int(math.Round(float64(m.Capacity)*phases[phaseAt(time.Since(start))].Capacity)))
	}
	adm := c.New(time.Now, o.Seed, capa)
	end := phases[len(phases)-1].End
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for t := o.Bin; t <= end && ctx.Err() == nil; t += o.Bin {
			time.Sleep(time.Until(start.Add(t)))
			mu.Lock()
			run.Sample(t, adm.Limit(), inflight)
			mu.Unlock()
		}
	})
	for at := time.Duration(0); at < end && ctx.Err() == nil; {
		p := phases[phaseAt(at)]
		time.Sleep(time.Until(start.Add(at)))
		mu.Lock()
		now := time.Since(start)
		release, ok := adm.Admit()
		if !ok {
			run.Rejected(now, time.Since(start)-now) // the limiter's own time to refuse
		}
		run.Arrive(now, ok, inflight, capa())
		if ok {
			inflight++
			lat := m.Latency(inflight, p.Capacity, noise)
			sent := now
			if lat <= timeout {
				wg.Add(1)
				time.AfterFunc(lat, func() {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					inflight--
					done := time.Since(start)
					run.Complete(done, done-sent, true)
					release(true)
				})
			} else {
				wg.Add(2)
				time.AfterFunc(timeout, func() {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					run.Complete(time.Since(start), timeout, false)
				})
				time.AfterFunc(lat, func() {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					inflight--
					release(false)
				})
			}
		}
		mu.Unlock()
		at += time.Duration(arrivals.ExpFloat64() * float64(time.Second) / (p.Load * m.Throughput(1)))
	}
	// Requests still in the server when the run ends are not waited for
	// past the deadline: their slots no longer matter.
	waitUntil(&wg, 2*timeout)
	return run
}

func waitUntil(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// Targets are issue 17's goals for a limiter in the overload model.
var Targets = []string{
	"goodput >= 100% of the oracle at 2x",
	"goodput >= 95% of the oracle at 5x",
	"p99 <= 2.5x no-load in steady overload (2x, 5x)",
	"p99 back <= 3x no-load within 2 s of halving",
	"0 false rejections at 0.5x",
}

// Verdicts returns, for each contender, whether each of Targets is met
// and by how much it is missed.
func Verdicts(res *sim.OverloadResult) map[string][]string {
	rows := map[string]map[string]sim.OverloadRow{}
	for _, r := range res.Rows {
		if rows[r.Limiter] == nil {
			rows[r.Limiter] = map[string]sim.OverloadRow{}
		}
		rows[r.Limiter][r.Phase] = r
	}
	out := map[string][]string{}
	for name, ph := range rows {
		v := []string{
			atLeast(ph["2x"].GoodputRatio, 1, "%.1f%%", 100),
			atLeast(ph["5x"].GoodputRatio, 0.95, "%.1f%%", 100),
			atMost(max(ph["2x"].P99Ratio, ph["5x"].P99Ratio), 2.5, "%.2fx", 1),
			atMost(ph["halved"].SettleS, 2, "%.2f s", 1),
			atMost(ph["0.5x"].FalseRejectRate, 0, "%.4f%%", 100),
		}
		out[name] = v
	}
	return out
}

func atLeast(v, want float64, format string, scale float64) string {
	if math.IsNaN(v) {
		return "missed (none)"
	}
	if v >= want {
		return "met (" + fmt.Sprintf(format, v*scale) + ")"
	}
	return "missed by " + fmt.Sprintf(format, (want-v)*scale) + " (" + fmt.Sprintf(format, v*scale) + ")"
}

func atMost(v, want float64, format string, scale float64) string {
	if math.IsNaN(v) {
		return "missed (never)"
	}
	if v <= want {
		return "met (" + fmt.Sprintf(format, v*scale) + ")"
	}
	return "missed by " + fmt.Sprintf(format, (v-want)*scale) + " (" + fmt.Sprintf(format, v*scale) + ")"
}
