package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one measurement.
type Config struct {
	URL      string
	Clients  int           // keep-alive connections, one loopback source address each
	Duration time.Duration // the measured window
	Warmup   time.Duration // load before the window, not counted
	// Rate is the offered load in requests per second for an open loop;
	// 0 runs a closed loop.
	Rate float64
	// PIDs are the processes whose CPU time is read at the start and the
	// end of the window, by name ("proxy", "upstream", "redis").
	PIDs map[string]int
	// SameSource connects every client from 127.0.0.1 instead of one
	// address each.
	SameSource bool
}

// Result is what a measurement saw.
type Result struct {
	Rate     float64       `json:"rate"` // offered req/s; 0: closed loop
	Requests int64         `json:"requests"`
	Errors   int64         `json:"errors"` // transport errors and statuses other than 200 and 429
	Denied   int64         `json:"denied"` // 429s
	Unsent   int64         `json:"unsent"` // open loop: scheduled in the window, not sent by its end
	Elapsed  time.Duration `json:"elapsed"`
	P50      time.Duration `json:"p50"`
	P90      time.Duration `json:"p90"`
	P99      time.Duration `json:"p99"`
	Max      time.Duration `json:"max"`
	// CPU is the CPU time each process of Config.PIDs spent in the
	// window, and "loadgen" this process's.
	CPU      map[string]time.Duration `json:"cpu"`
	Headers  bool                     `json:"headers"` // some response carried a RateLimit header
	FirstErr string                   `json:"first_err,omitempty"`
}

// PerSecond is completed requests per second of the window.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// CPUPerRequest is the CPU time of process name per completed request.
func (r Result) CPUPerRequest(name string) time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.CPU[name] / time.Duration(r.Requests)
}

// String is a one-line summary.
func (r Result) String() string {
	s := fmt.Sprintf("%d req in %v (%.0f/s), p50 %v p99 %v, %d errors, %d 429s",
		r.Requests, r.Elapsed.Round(time.Millisecond), r.PerSecond(),
		r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Errors, r.Denied)
	names := make([]string, 0, len(r.CPU))
	for n := range r.CPU {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s += fmt.Sprintf(", %s %.1f µs/req", n, float64(r.CPUPerRequest(n))/1e3)
	}
	return s
}

// Run measures cfg.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Clients < 1 {
		return Result{}, errors.New("loadgen: Clients must be at least 1")
	}
	if cfg.Duration <= 0 {
		return Result{}, errors.New("loadgen: Duration must be positive")
	}
	if cfg.Rate < 0 {
		return Result{}, errors.New("loadgen: Rate must not be negative")
	}
	if cfg.Clients > 200*256 {
		return Result{}, errors.New("loadgen: at most 51200 clients")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
	if err != nil {
		return Result{}, fmt.Errorf("loadgen: %w", err)
	}
	clients := make([]*http.Client, cfg.Clients)
	for i := range clients {
		d := &net.Dialer{}
		if !cfg.SameSource {
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, byte(i/200), byte(2+i%200))}
		}
		clients[i] = &http.Client{
			Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1, DisableCompression: true},
			Timeout:   10 * time.Second,
		}
	}
	defer func() {
		for _, c := range clients {
			c.Transport.(*http.Transport).CloseIdleConnections()
		}
	}()
	if cfg.Warmup > 0 {
		phase(ctx, clients, req, cfg.Rate, cfg.Warmup)
	}
	cpu0 := readCPU(cfg.PIDs)
	r := phase(ctx, clients, req, cfg.Rate, cfg.Duration)
	cpu1 := readCPU(cfg.PIDs)
	r.CPU = map[string]time.Duration{}
	for n, t := range cpu1 {
		if t0, ok := cpu0[n]; ok {
			r.CPU[n] = t - t0
		}
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, nil
}

func readCPU(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for n, pid := range pids {
		if t, err := ProcCPU(pid); err == nil {
			out[n] = t
		}
	}
	if t, err := ProcCPU(os.Getpid()); err == nil {
		out["loadgen"] = t
	}
	return out
}

// counters are a phase's shared tallies.
type counters struct {
	n, errs, denied atomic.Int64
	headers         atomic.Bool
	mu              sync.Mutex
	firstErr        error
	lat             []time.Duration
}

func (c *counters) fail(err error) {
	c.errs.Add(1)
	c.mu.Lock()
	if c.firstErr == nil {
		c.firstErr = err
	}
	c.mu.Unlock()
}

// do sends req once with c and tallies the answer; it reports whether a
// response came.
func (cs *counters) do(c *http.Client, req *http.Request) bool {
	res, err := c.Do(req)
	if err != nil {
		if req.Context().Err() == nil {
			cs.fail(err)
		}
		return false
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		cs.denied.Add(1)
	default:
		cs.fail(fmt.Errorf("status %s", res.Status))
	}
	if _, ok := res.Header["Ratelimit"]; ok {
		cs.headers.Store(true)
	}
	cs.n.Add(1)
	return true
}

// phase runs one load phase of d: a closed loop when rate is 0, else an
// open loop at rate.
func phase(ctx context.Context, clients []*http.Client, req *http.Request, rate float64, d time.Duration) Result {
	var cs counters
	var wg sync.WaitGroup
	var unsent atomic.Int64
	t0 := time.Now()
	deadline := t0.Add(d)
	if rate == 0 {
		for _, c := range clients {
			wg.Go(func() {
				mine := make([]time.Duration, 0, 1024)
				for ctx.Err() == nil {
					st := time.Now()
					if !st.Before(deadline) {
						break
					}
					if cs.do(c, req) {
						mine = append(mine, time.Since(st))
					}
				}
				cs.mu.Lock()
				cs.lat = append(cs.lat, mine...)
				cs.mu.Unlock()
			})
		}
	} else {
		// The schedule: request i is due at t0 + i/rate. A dispatcher
		// hands due times to the clients; one that is busy leaves the
		// time in the queue for another, and the latency of a request
		// runs from its due time.
		total := int64(rate * d.Seconds())
		queue := make(chan time.Time, min(total+1, 1<<20))
		interval := time.Duration(float64(time.Second) / rate)
		wg.Go(func() {
			defer close(queue)
			for i := int64(0); i < total; {
				now := time.Now()
				if !now.Before(deadline) || ctx.Err() != nil {
					unsent.Add(total - i)
					break
				}
				for ; i < total; i++ {
					due := t0.Add(time.Duration(i) * interval)
					if due.After(now) {
						break
					}
					select {
					case queue <- due:
					default:
						unsent.Add(1)
					}
				}
				if i < total {
					time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
				}
			}
		})
		for _, c := range clients {
			wg.Go(func() {
				mine := make([]time.Duration, 0, 1024)
				for due := range queue {
					if !time.Now().Before(deadline) || ctx.Err() != nil {
						unsent.Add(1)
						continue
					}
					if cs.do(c, req) {
						mine = append(mine, time.Since(due))
					}
				}
				cs.mu.Lock()
				cs.lat = append(cs.lat, mine...)
				cs.mu.Unlock()
			})
		}
	}
	wg.Wait()
	r := Result{
		Rate:     rate,
		Requests: cs.n.Load(),
		Errors:   cs.errs.Load(),
		Denied:   cs.denied.Load(),
		Unsent:   unsent.Load(),
		Elapsed:  time.Since(t0),
		Headers:  cs.headers.Load(),
	}
	if rate > 0 {
		// The window is the schedule's, not the stragglers'.
		r.Elapsed = d
	}
	if cs.firstErr != nil {
		r.FirstErr = cs.firstErr.Error()
	}
	if len(cs.lat) > 0 {
		slices.Sort(cs.lat)
		at := func(p float64) time.Duration { return cs.lat[int(p*float64(len(cs.lat)-1))] }
		r.P50, r.P90, r.P99, r.Max = at(0.5), at(0.9), at(0.99), cs.lat[len(cs.lat)-1]
	}
	return r
}

// ProcCPU returns the CPU time process pid has used so far, from the
// scheduler's nanosecond counters of each of its threads
// (/proc/pid/task/*/schedstat), or, where those are absent, from
// utime+stime in /proc/pid/stat (10 ms ticks). Linux only.
func ProcCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err == nil && len(tasks) > 0 {
		var sum time.Duration
		ok := false
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			fs := strings.Fields(string(b))
			if len(fs) < 1 {
				continue
			}
			ns, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				continue
			}
			sum += time.Duration(ns)
			ok = true
		}
		if ok {
			return sum, nil
		}
	}
	return procStat(pid)
}

func procStat(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("loadgen: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("loadgen: /proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("loadgen: /proc/%d/stat: bad utime/stime", pid)
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}
