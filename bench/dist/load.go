package dist

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/bench/rls"
)

// Load is what Measure sends.
type Load struct {
	Callers  int // concurrent callers
	Conns    int // gRPC connections, spread over the instances round robin
	Duration time.Duration
	// Rate, when positive, is the offered load in decisions a second
	// (open loop: decision i is due at start + i/Rate); zero is a closed
	// loop (saturation).
	Rate float64
	// Key names the counters; Keys distinct values of it are asked in
	// turn (a caller at a time per value when Keys >= Callers). Limit is
	// each counter's limit a second.
	Key   string
	Keys  int
	Limit int64
	// Prefix starts every value, so that a run's counters are its own.
	Prefix string
}

// Result is one measurement of one contender.
type Result struct {
	Name         string
	Decisions    int64 // answered
	Admitted     int64
	Errors       int64
	FirstErr     error
	Elapsed      time.Duration
	Start        time.Time
	P50, P99     time.Duration
	CPU, LoadCPU time.Duration // the contender's processes; the load client's
	ClockWindows bool
}

// PerSecond returns decisions a second.
func (r Result) PerSecond() float64 { return float64(r.Decisions) / r.Elapsed.Seconds() }

// PerCPU returns decisions a second of the contender's CPU.
func (r Result) PerCPU() float64 { return float64(r.Decisions) / max(r.CPU.Seconds(), 1e-9) }

// Allowed returns what a limit of limit a second per counter admits over
// the run: limit times the one-second windows it touched (on the clock's
// seconds, or from the first hit).
func (r Result) Allowed(limit int64) int64 {
	w := int64(math.Ceil(r.Elapsed.Seconds()))
	if r.ClockWindows {
		end := r.Start.Add(r.Elapsed)
		w = end.Unix() - r.Start.Unix() + 1
	}
	return limit * w
}

func (r Result) String() string {
	return fmt.Sprintf("%-26s %8.0f dec/s  %7.0f dec/CPU-s  p50 %8v  p99 %8v  cpu %5.1f µs/dec  load %5.1f µs/dec  admitted %d  errors %d",
		r.Name, r.PerSecond(), r.PerCPU(), r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond),
		r.CPU.Seconds()*1e6/float64(max(1, r.Decisions)), r.LoadCPU.Seconds()*1e6/float64(max(1, r.Decisions)), r.Admitted, r.Errors)
}

// Measure runs l against s, its connections spread over s's instances.
func Measure(ctx context.Context, s *Set, l Load) (Result, error) {
	const pool = 4096
	reqs := make([][]byte, min(pool, max(1, l.Keys)))
	for i := range reqs {
		var err error
		if reqs[i], err = s.Target.Request(l.Key, l.Prefix+"k"+strconv.Itoa(i), l.Limit); err != nil {
			return Result{}, err
		}
	}
	addrs := s.Addrs()
	conns := make([]Conn, max(1, l.Conns))
	for i := range conns {
		c, err := s.Target.Dial(addrs[i%len(addrs)])
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	call := func(conn int, req []byte) (bool, error) { return conns[conn].Call(ctx, req) }
	warm, err := s.Target.Request("warm", l.Prefix+"warm", l.Limit) // a counter of its own, of no rule's
	if err != nil {
		return Result{}, err
	}
	for i := range conns { // warm up: connections, and the owners' peer links
		if _, err := call(i, warm); err != nil {
			return Result{}, fmt.Errorf("%s: warm-up: %w", s.Name, err)
		}
	}
	return run(s, l, reqs, len(conns), call), nil
}

// run is Measure's loop: l.Callers callers until l.Duration is over.
func run(s *Set, l Load, reqs [][]byte, nconns int, call func(int, []byte) (bool, error)) Result {
	var (
		wg        sync.WaitGroup
		stop      atomic.Bool
		mu        sync.Mutex
		lats      []time.Duration
		errs, adm atomic.Int64
		firstErr  atomic.Value
		sent      atomic.Int64
	)
	c0, l0 := s.CPU(), selfCPU()
	start := time.Now()
	for i := range max(1, l.Callers) {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1<<14)
			for n := i; !stop.Load(); n += max(1, l.Callers) {
				if l.Rate > 0 {
					due := start.Add(time.Duration(float64(sent.Add(1)-1) * float64(time.Second) / l.Rate))
					if time.Sleep(time.Until(due)); stop.Load() {
						break
					}
				}
				t0 := time.Now()
				ok, err := call(i%nconns, reqs[n%len(reqs)])
				mine = append(mine, time.Since(t0))
				switch {
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				case ok:
					adm.Add(1)
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	time.Sleep(l.Duration)
	stop.Store(true)
	wg.Wait()
	r := Result{Name: s.Name, Start: start, Elapsed: time.Since(start), Errors: errs.Load(), Admitted: adm.Load(),
		CPU: s.CPU() - c0, LoadCPU: selfCPU() - l0, ClockWindows: s.Target.ClockWindows}
	r.Decisions = int64(len(lats)) - r.Errors
	if e, ok := firstErr.Load().(error); ok {
		r.FirstErr = e
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		r.P50, r.P99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return r
}

func selfCPU() time.Duration {
	d, _ := rls.CPUTime(os.Getpid())
	return d
}
