package sim

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// RealTimeOptions configures [RealTime]. The zero value of each field is
// the overload scenario's default.
type RealTimeOptions struct {
	Seed   uint64
	Model  IOModel
	Warmup time.Duration // at 0.5x, not reported; 0 means 5 s, negative none
	Phase  time.Duration // length of each phase; 0 means 10 s
	Bin    time.Duration // time series step; 0 means 250 ms
	// Contenders must include the oracle (OracleName), the reference of
	// every goodput; nil means OverloadContenders().
	Contenders []OverloadContender
	// Progress, when set, is called once a second with the time elapsed
	// and the run's length.
	Progress func(elapsed, total time.Duration)
}

// OverloadResult is the outcome of [RealTime]: one row per contender and
// phase, as "sluice sim overload" prints them.
type OverloadResult struct {
	Result
	Rows      []OverloadRow
	NoLoadP99 time.Duration // the oracle's p99 at 0.5x
	res       *overloadResult
}

// WriteSeries writes the time series of every contender as CSV, one row
// per contender and bin: limit (-1: none), requests in flight, p99 of the
// responses in the bin, and goodput.
func (r *OverloadResult) WriteSeries(w io.Writer) error { return r.res.Series().Write(w, "csv") }

// RejectionP99 returns the 99th percentile of the time limiter's refusals
// took in phase (its own call, in process), or 0 if none was recorded.
func (r *OverloadResult) RejectionP99(limiter, phase string) time.Duration {
	for _, run := range r.res.Runs {
		if run.Name == limiter {
			return run.RejectionP99(phase)
		}
	}
	return 0
}

// RealTime runs the overload scenario's model in real time, for limiters
// that read the wall clock inside and so cannot run in virtual time: every
// contender at once, each against its own copy of the model with the same
// arrival draws, so that timer noise and machine load fall on all of them
// alike. The rows are those of the virtual scenario, and each phase's
// goodput is compared with the oracle's from the same run.
func RealTime(ctx context.Context, o RealTimeOptions) (*OverloadResult, error) {
	oo, err := overloadOptions{RealTimeOptions: o}.withDefaults()
	if err != nil {
		return nil, err
	}
	phases := overloadPhases(oo.Warmup, oo.Phase)
	end := phases[len(phases)-1].End
	start := time.Now().Add(50 * time.Millisecond)
	runs := make([]*runRecord, len(oo.Contenders))
	var wg sync.WaitGroup
	for i, c := range oo.Contenders {
		wg.Go(func() { runs[i] = realTimeRun(ctx, oo, phases, c, start) })
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
	res, err := summarize(runs, oo.Bin, oo.SteadyAfter)
	if err != nil {
		return nil, err
	}
	res.Throughput = oo.Model.throughput(1)
	return &OverloadResult{Result: Result{res}, Rows: res.Rows, NoLoadP99: res.NoLoadP99, res: res}, nil
}

// realTimeRun drives one contender: an arrival loop on the wall clock, a
// timer per admitted request, a sample per bin.
func realTimeRun(ctx context.Context, o overloadOptions, phases []overloadPhase, c OverloadContender, start time.Time) *runRecord {
	m := o.Model
	run := newRunRecord(c.Name, phases, o.Bin)
	var mu sync.Mutex // guards run, inflight, noise, stopped and the admitter's calls
	inflight := 0
	// stopped is set when the run is over: callbacks still pending (a
	// late timer, a lagging sample) then leave run alone.
	stopped := false
	noise := rand.New(rand.NewPCG(o.Seed, 2))
	arrivals := rand.New(rand.NewPCG(o.Seed, 1))
	phase := func(t time.Duration) overloadPhase {
		if i := phaseAt(phases, t); i >= 0 {
			return phases[i]
		}
		return phases[len(phases)-1]
	}
	capa := func() int {
		return max(1, int(math.Round(float64(m.Capacity)*phase(time.Since(start)).Capacity)))
	}
	adm := c.New(time.Now, o.Seed, capa)
	end := phases[len(phases)-1].End
	var wg sync.WaitGroup
	wg.Go(func() {
		for t := o.Bin; t <= end && ctx.Err() == nil; t += o.Bin {
			time.Sleep(time.Until(start.Add(t)))
			mu.Lock()
			if !stopped {
				run.Sample(t, adm.Limit(), inflight)
			}
			mu.Unlock()
		}
	})
	// after runs f under mu once d has passed.
	after := func(d time.Duration, f func()) {
		wg.Add(1)
		time.AfterFunc(d, func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if !stopped {
				f()
			}
		})
	}
	for at := time.Duration(0); at < end && ctx.Err() == nil; {
		p := phase(at)
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
			lat := m.latency(inflight, p.Capacity, noise)
			sent := now
			if lat <= m.Timeout {
				after(lat, func() {
					inflight--
					done := time.Since(start)
					run.Complete(done, done-sent, true)
					release(true)
				})
			} else {
				after(m.Timeout, func() { run.Complete(time.Since(start), m.Timeout, false) })
				after(lat, func() {
					inflight--
					release(false)
				})
			}
		}
		mu.Unlock()
		at += time.Duration(arrivals.ExpFloat64() * float64(time.Second) / (p.Load * m.throughput(1)))
	}
	// Requests still in the server when the run ends are not waited for
	// past the deadline: their slots no longer matter.
	waitUntil(&wg, 2*m.Timeout)
	mu.Lock()
	stopped = true
	mu.Unlock()
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
