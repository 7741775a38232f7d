package sim

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
)

// This file is the CPU-bound half of the overload scenario. It is not a
// simulation: a real HTTP server burns real CPU in a process of its own,
// and a load generator in this process drives it over loopback, in real
// time, for a bounded time. Its numbers depend on the machine.

// cpuServerOptions configures [serveCPU].
type cpuServerOptions struct {
	// Limiter is sluice-gradient, sluice-vegas, fixed:N or none.
	Limiter string
	// Work is the CPU time one request costs on an idle core; 0 means 5 ms.
	Work time.Duration
}

// cpuServer is the server's state.
type cpuServer struct {
	iters    atomic.Int64 // hash rounds per request
	inflight atomic.Int64
	lim      interface{ Limit() int }
}

// calibrate returns the hash rounds that take work on this machine (the
// fastest of a few tries, as the least disturbed by other processes).
func calibrate(work time.Duration) int64 {
	const probe = 20000
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t := time.Now()
		spin(probe)
		best = min(best, time.Since(t))
	}
	return max(1, int64(float64(probe)*float64(work)/float64(max(best, 1))))
}

var spinSink atomic.Uint64

// spin hashes n times: CPU work that no compiler removes.
func spin(n int64) {
	var h [32]byte
	for range n {
		h = sha256.Sum256(h[:8])
	}
	spinSink.Add(uint64(h[0]))
}

// serveCPU runs the CPU-bound server on a free loopback port, prints
// "listening ADDR" on stdout, and serves until ctx ends or stdin closes
// (so it does not outlive the process that started it). Paths:
// "/work" burns Work of CPU behind the limiter; "/capacity?factor=F"
// multiplies the work of later requests (2 halves the capacity);
// "/stats" answers {"limit":L,"inflight":N}.
func serveCPU(ctx context.Context, o cpuServerOptions, stdin io.Reader, stdout io.Writer) error {
	orDefault(&o.Work, 5*time.Millisecond)
	s := &cpuServer{}
	base := calibrate(o.Work)
	s.iters.Store(base)
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spin(s.iters.Load())
		w.WriteHeader(http.StatusNoContent)
	})
	var h http.Handler
	switch name := o.Limiter; {
	case name == "sluice-gradient":
		l := adaptive.NewGradient(adaptive.GradientOptions{})
		s.lim, h = l, (&httplimit.Adaptive{Limiter: l}).Handler(work)
	case name == "sluice-vegas":
		l := adaptive.NewVegas(adaptive.VegasOptions{})
		s.lim, h = l, (&httplimit.Adaptive{Limiter: l}).Handler(work)
	case strings.HasPrefix(name, "fixed:"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "fixed:"))
		if err != nil || n < 1 {
			return fmt.Errorf("sim: cpu server: limiter %q: want fixed:N with N >= 1", name)
		}
		l := adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: adaptive.LimiterOptions{
			Initial: n, Min: n, Max: n, Probe: adaptive.ProbeOptions{Interval: -1}}})
		s.lim, h = l, (&httplimit.Adaptive{Limiter: l}).Handler(work)
	case name == "none":
		h = work
	default:
		return fmt.Errorf("sim: cpu server: unknown limiter %q (want sluice-gradient, sluice-vegas, fixed:N or none)", name)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		w.Header().Set("Sluice-Inflight", strconv.FormatInt(n-1, 10))
		h.ServeHTTP(w, r)
	})
	mux.HandleFunc("/capacity", func(w http.ResponseWriter, r *http.Request) {
		f, err := strconv.ParseFloat(r.URL.Query().Get("factor"), 64)
		if err != nil || !(f >= 0.1 && f <= 100) {
			http.Error(w, "factor: want a number in [0.1, 100]", http.StatusBadRequest)
			return
		}
		s.iters.Store(max(1, int64(float64(base)*f)))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		limit := -1
		if s.lim != nil {
			limit = s.lim.Limit()
		}
		fmt.Fprintf(w, `{"limit":%d,"inflight":%d}`+"\n", limit, s.inflight.Load())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// cpuOptions configures [overloadCPU].
type cpuOptions struct {
	// Command starts the server in a process of its own; overloadCPU
	// appends "--cpu-limiter NAME --cpu-work D" and expects the
	// server to behave as serveCPU.
	Command []string
	Work    time.Duration // CPU per request; 0 means 5 ms
	Warmup  time.Duration // 0 means 1 s
	Phase   time.Duration // 0 means 2 s
	Bin     time.Duration // 0 means 250 ms
	Timeout time.Duration // the client's deadline; 0 means 1 s
	Seed    uint64
	// Oracle is the fixed limit of the reference; 0 means twice the
	// number of CPUs.
	Oracle int
	// Limiters are the contenders besides the oracle; nil means
	// sluice-gradient, sluice-vegas and none.
	Limiters []string
	// Log, when set, gets a line as each step starts.
	Log io.Writer
}

// overloadCPU runs the overload phases against a CPU-bound HTTP server in
// its own process, once per limiter: it measures the server's capacity
// with the oracle's fixed limit, then offers 0.5x, 2x and 5x of it,
// halves the capacity (twice the work per request) and restores it.
// Refusals are counted as false when the server had fewer requests in
// flight than CPUs.
func overloadCPU(ctx context.Context, o cpuOptions) (*overloadResult, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("sim: overload cpu: no server command")
	}
	orDefault(&o.Work, 5*time.Millisecond)
	orDefault(&o.Warmup, time.Second)
	orDefault(&o.Phase, 2*time.Second)
	orDefault(&o.Bin, 250*time.Millisecond)
	orDefault(&o.Timeout, time.Second)
	orDefault(&o.Oracle, 2*runtime.NumCPU())
	if o.Limiters == nil {
		o.Limiters = []string{"sluice-gradient", "sluice-vegas", "none"}
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "sluice sim overload --cpu: "+format+"\n", a...)
		}
	}
	oracle := fmt.Sprintf("fixed:%d", o.Oracle)
	// The capacity: the oracle's server, closed loop, for 2 s.
	logf("measuring the server's capacity (%v of CPU per request, fixed limit %d)", o.Work, o.Oracle)
	capacity, err := func() (float64, error) {
		srv, err := startCPUServer(ctx, o, oracle)
		if err != nil {
			return 0, err
		}
		defer srv.stop()
		return srv.capacity(ctx, o.Oracle, 2*time.Second)
	}()
	if err != nil {
		return nil, err
	}
	logf("capacity %.0f requests/s", capacity)
	phases := overloadPhases(o.Warmup, o.Phase)
	var runs []*runRecord
	names := append([]string{OracleName}, o.Limiters...)
	for i, name := range names {
		lim := name
		if name == OracleName {
			lim = oracle
		}
		logf("%s (%d of %d), %v", name, i+1, len(names), phases[len(phases)-1].End)
		run, err := cpuRun(ctx, o, name, lim, phases, capacity)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, run)
	}
	res, err := summarize(runs, o.Bin, min(o.Phase/4, 500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	res.Throughput = capacity
	return res, nil
}

type cpuProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	url    string
	client *http.Client
}

func startCPUServer(ctx context.Context, o cpuOptions, limiter string) (*cpuProc, error) {
	args := append(o.Command[1:len(o.Command):len(o.Command)], "--cpu-limiter", limiter, "--cpu-work", o.Work.String())
	cmd := exec.CommandContext(ctx, o.Command[0], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &cpuProc{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		p.stop()
		return nil, fmt.Errorf("sim: cpu server said %q (%v), want \"listening ADDR\"", line, err)
	}
	p.url = "http://" + addr
	p.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxIdleConns: 4096,
		DisableCompression: true}}
	return p, nil
}

// control sends a control request (a capacity change). A server without a
// limit may be too swamped to answer at once, so it is tried a few times
// on a fresh connection, each with a generous deadline.
func (p *cpuProc) control(ctx context.Context, path string) error {
	var err error
	for range 4 {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, rerr := http.NewRequestWithContext(actx, http.MethodGet, p.url+path, nil)
		if rerr != nil {
			cancel()
			return rerr
		}
		req.Close = true
		var resp *http.Response
		resp, err = http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			cancel()
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("sim: cpu server: %s: %s", path, resp.Status)
			}
			return nil
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("sim: cpu server: %s: %w", path, err)
}

func (p *cpuProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	if p.client != nil {
		p.client.CloseIdleConnections()
	}
}

// capacity measures the requests a second the server completes with n
// clients in a closed loop.
func (p *cpuProc) capacity(ctx context.Context, n int, d time.Duration) (float64, error) {
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				resp, err := p.client.Get(p.url + "/work")
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusNoContent {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if done.Load() == 0 {
		return 0, errors.New("sim: cpu server completed nothing")
	}
	return float64(done.Load()) / d.Seconds(), ctx.Err()
}

func cpuRun(ctx context.Context, o cpuOptions, name, limiter string, phases []overloadPhase, capacity float64) (*runRecord, error) {
	p, err := startCPUServer(ctx, o, limiter)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	run := newRunRecord(name, phases, o.Bin)
	var mu sync.Mutex // guards run
	cpus := runtime.NumCPU()
	r := rand.New(rand.NewPCG(o.Seed, 3))
	start := time.Now()
	end := phases[len(phases)-1].End
	var wg sync.WaitGroup
	// Samples of the limit and the requests in flight, every bin.
	wg.Go(func() {
		for t := o.Bin; t <= end; t += o.Bin {
			time.Sleep(time.Until(start.Add(t)))
			var st struct{ Limit, Inflight int }
			if resp, err := p.client.Get(p.url + "/stats"); err == nil {
				_ = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
			}
			mu.Lock()
			run.Sample(t, st.Limit, st.Inflight)
			mu.Unlock()
		}
	})
	capNow := 1.0
	for at := time.Duration(0); at < end && ctx.Err() == nil; {
		i := phaseAt(phases, at)
		ph := phases[i]
		if ph.Capacity != capNow {
			capNow = ph.Capacity
			if err := p.control(ctx, "/capacity?factor="+strconv.FormatFloat(1/capNow, 'g', -1, 64)); err != nil {
				return nil, err
			}
		}
		time.Sleep(time.Until(start.Add(at)))
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			sent := time.Now()
			req, _ := http.NewRequestWithContext(rctx, http.MethodGet, p.url+"/work", nil)
			resp, err := p.client.Do(req)
			lat := time.Since(sent)
			t := sent.Sub(start)
			inflight := cpus // unknown (no answer): not counted as a false refusal
			status := 0
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
				if v, err := strconv.Atoi(resp.Header.Get("Sluice-Inflight")); err == nil {
					inflight = v
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case status == http.StatusServiceUnavailable:
				run.Arrive(t, false, inflight, cpus)
				run.Rejected(t, lat)
			case status == http.StatusNoContent:
				run.Arrive(t, true, inflight, cpus)
				run.Complete(t+lat, lat, lat <= o.Timeout)
			default: // the deadline, or a broken connection
				run.Arrive(t, true, inflight, cpus)
				run.Complete(t+min(lat, o.Timeout), min(lat, o.Timeout), false)
			}
		})
		at += time.Duration(r.ExpFloat64() * float64(time.Second) / (ph.Load * capacity))
	}
	wg.Wait()
	return run, ctx.Err()
}

// Rejected records that the refusal of a request sent at t took took
// (real-time runs; the virtual model refuses in no time).
func (r *runRecord) Rejected(t, took time.Duration) {
	if i := phaseAt(r.phases, t); i >= 0 {
		r.rejections[i] = append(r.rejections[i], float64(took))
	}
}

// RejectionP99 returns the 99th percentile of the time refusals took in
// phase, or 0 if none was recorded.
func (r *runRecord) RejectionP99(phase string) time.Duration {
	for i, p := range r.phases {
		if p.Name == phase && len(r.rejections[i]) > 0 {
			return time.Duration(percentile(r.rejections[i], 0.99))
		}
	}
	return 0
}
