package overload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// HTTPOptions configures [RunHTTP]. The zero value is the default.
type HTTPOptions struct {
	// Work is the CPU time of an ordinary request, SlowWork that of a
	// slow one, SlowShare the share of slow requests (bimodal latency).
	// 0 means 1 ms, 10 × Work and 0.1.
	Work, SlowWork time.Duration
	SlowShare      float64
	// Timeout is the client's deadline for one attempt; 0 means 250 ms.
	// A request succeeds if an attempt gets a 200 in time; its latency is
	// from its first attempt.
	Timeout time.Duration
	// Retries is the attempts after the first in the retry phases, on a
	// refusal (503) or a timeout; 0 means 3. Backoff is the first delay
	// of the backoff phase (full jitter, doubled per attempt); 0 means
	// 20 ms.
	Retries int
	Backoff time.Duration
	Warmup  time.Duration // at 0.5x before the phases, not reported; 0 means 1 s
	Measure time.Duration // of the capacity, before each contender's run; 0 means 500 ms
	Phase   time.Duration // 0 means 2 s
	Rounds  int           // 0 means 1
	Seed    uint64
	// Fixed is the limit of the fixed contenders (the reference
	// oracle-fixed and failsafe-bulkhead); 0 means 2 per core.
	Fixed      int
	Contenders []sim.OverloadContender // nil means Contenders(Fixed)
	// MaxOutstanding bounds the client's requests in flight; an arrival
	// past it fails at once. 0 means 1024.
	MaxOutstanding int
	// Progress, when set, is called as each contender's run ends.
	Progress func(round int, contender string)
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	positive := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	positive(&o.Work, time.Millisecond)
	positive(&o.SlowWork, 10*o.Work)
	positive(&o.Timeout, 250*time.Millisecond)
	positive(&o.Backoff, 20*time.Millisecond)
	positive(&o.Warmup, time.Second)
	positive(&o.Measure, 500*time.Millisecond)
	positive(&o.Phase, 2*time.Second)
	if o.SlowShare <= 0 || o.SlowShare >= 1 {
		o.SlowShare = 0.1
	}
	o.Retries = cmp(o.Retries, 3)
	o.Rounds = cmp(o.Rounds, 1)
	o.Fixed = cmp(o.Fixed, 2*runtime.GOMAXPROCS(0))
	o.MaxOutstanding = cmp(o.MaxOutstanding, 1024)
	if o.Contenders == nil {
		o.Contenders = Contenders(o.Fixed)
	}
	return o
}

func cmp(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// retryMode is how the clients of a phase retry.
type retryMode int

const (
	noRetry   retryMode = iota
	immediate           // at once: a retry storm
	backoff             // after a jittered, doubling delay
)

// httpPhase is a stretch of the HTTP model's run.
type httpPhase struct {
	name  string
	load  float64 // offered requests, a multiple of the measured capacity
	retry retryMode
}

// HTTPPhases are the HTTP model's phases, after a warm-up at 0.5x: no
// load to speak of, 2x without retries, then 2x of clients that retry at
// once, then 2x of clients that back off.
var HTTPPhases = []string{"0.5x", "2x", "2x-retry", "2x-backoff"}

var httpPhases = []httpPhase{{"warmup", 0.5, noRetry}, {"0.5x", 0.5, noRetry}, {"2x", 2, noRetry},
	{"2x-retry", 2, immediate}, {"2x-backoff", 2, backoff}}

// HTTPResult is the outcome of [RunHTTP].
type HTTPResult struct {
	Rounds [][]Row // per round, a row per contender and phase
	// Capacity is, per round, the least and the most capacity measured
	// before a contender's run, requests per second.
	Capacity [][2]float64
	Iters    int64 // hash rounds of an ordinary request
}

// RunHTTP runs the CPU-bound HTTP model: a real net/http server on
// 127.0.0.1 whose handler burns CPU behind the contender's limiter, so
// that overload is contention for this machine's cores. Each round runs
// every contender in turn (the order rotated per round) on the same
// arrival and slow-request draws; the rows of a round compare its
// contenders with each other only. The machine is shared, so its
// capacity drifts during a round: before each contender's run the
// server's capacity without a limit is measured afresh, the run's loads
// are multiples of it, and goodput is compared as a share of it; latency
// is compared with the same contender's at 0.5x, a few seconds earlier.
func RunHTTP(ctx context.Context, o HTTPOptions) (*HTTPResult, error) {
	o = o.withDefaults()
	iters := calibrateSpin(o.Work)
	res := &HTTPResult{Iters: iters}
	for round := range o.Rounds {
		runs := make([]*httpRun, len(o.Contenders))
		span := [2]float64{math.Inf(1), 0}
		for k := range o.Contenders {
			i := (k + round) % len(o.Contenders)
			c := o.Contenders[i]
			capacity, err := measureCapacity(ctx, o, iters)
			if err != nil {
				return nil, err
			}
			span = [2]float64{min(span[0], capacity), max(span[1], capacity)}
			if runs[i], err = runContender(ctx, o, iters, capacity, uint64(round), c); err != nil {
				return nil, fmt.Errorf("overload: http model, %s: %w", c.Name, err)
			}
			runs[i].capacity = capacity
			time.Sleep(200 * time.Millisecond) // the last one's connections close

			if o.Progress != nil {
				o.Progress(round, c.Name)
			}
		}
		rows, err := httpRows(runs, o.Phase)
		if err != nil {
			return nil, err
		}
		res.Rounds = append(res.Rounds, rows)
		res.Capacity = append(res.Capacity, span)
	}
	return res, nil
}

var spinSink atomic.Uint64

// spin mixes a word n times: CPU work the compiler cannot drop. It stops
// early, returning false, once ctx is done (checked every 4096 rounds),
// and yields its core every 65536 rounds (about 100 µs): a handler that
// burns its CPU in one piece holds a core for the scheduler's whole 10 ms
// slice, and the server's own goroutines (accepting, reading requests,
// refusing) wait behind it, so that admission itself would be what the
// run measures.
func spin(ctx context.Context, n int64) bool {
	x := uint64(n) | 1
	for i := range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i&4095 == 4095 {
			if ctx.Err() != nil {
				spinSink.Add(x)
				return false
			}
			if i&65535 == 65535 {
				runtime.Gosched()
			}
		}
	}
	spinSink.Add(x)
	return true
}

// calibrateSpin returns the rounds of spin that take work, from the
// fastest of a few tries (the least disturbed by other processes).
func calibrateSpin(work time.Duration) int64 {
	const probe = 1 << 20
	best := time.Duration(math.MaxInt64)
	for range 5 {
		t := time.Now()
		spin(context.Background(), probe)
		best = min(best, time.Since(t))
	}
	return max(1, int64(float64(probe)*float64(work)/float64(max(best, 1))))
}

// cpuHandler burns the CPU a request asks for (?n=rounds) behind an
// admitter, answering 503 when refused. Admit and release run under mu
// (the model's fixed admitters are not safe for concurrent use); a
// request whose client gave up stops burning and is released as dropped.
type cpuHandler struct {
	mu  sync.Mutex
	adm sim.Admitter
}

func (h *cpuHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	release, ok := h.adm.Admit()
	h.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	done := spin(r.Context(), min(max(n, 1), 1<<32))
	h.mu.Lock()
	release(done)
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// server is a cpuHandler on a loopback port.
type server struct {
	srv  *http.Server
	url  string
	done chan struct{}
}

func startServer(adm sim.Admitter) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{srv: &http.Server{Handler: &cpuHandler{adm: adm}, ReadHeaderTimeout: 5 * time.Second},
		url: "http://" + ln.Addr().String() + "/work?n=", done: make(chan struct{})}
	go func() { defer close(s.done); _ = s.srv.Serve(ln) }()
	return s, nil
}

// stop closes the server and every connection at once (the run's
// clients are done; a handler still burning sees its request cancelled).
func (s *server) stop() {
	_ = s.srv.Close()
	<-s.done
}

func newClient(o HTTPOptions) *http.Client {
	return &http.Client{Timeout: o.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: o.MaxOutstanding,
		MaxConnsPerHost: o.MaxOutstanding, DisableCompression: true}}
}

// measureCapacity returns the requests per second the server completes
// without a limit, driven by 2 clients per core back to back for
// o.Measure (the mix of ordinary and slow requests of the model).
func measureCapacity(ctx context.Context, o HTTPOptions, iters int64) (float64, error) {
	s, err := startServer(noLimit{})
	if err != nil {
		return 0, err
	}
	defer s.stop()
	c := newClient(o)
	defer c.CloseIdleConnections()
	var done atomic.Int64
	d := o.Measure
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(o.Seed, uint64(g)))
			for time.Now().Before(end) && ctx.Err() == nil {
				if code, _ := get(ctx, c, s.url, work(o, iters, r)); code == http.StatusOK {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if done.Load() == 0 {
		return 0, errors.New("overload: http model: the server completed nothing while its capacity was measured")
	}
	return float64(done.Load()) / d.Seconds(), ctx.Err()
}

// noLimit admits everything.
type noLimit struct{}

func (noLimit) Admit() (func(bool), bool) { return func(bool) {}, true }
func (noLimit) Limit() int                { return -1 }

// work draws the hash rounds of one request: SlowWork with probability
// SlowShare, else Work.
func work(o HTTPOptions, iters int64, r *rand.Rand) int64 {
	if r.Float64() < o.SlowShare {
		return iters * int64(o.SlowWork) / int64(o.Work)
	}
	return iters
}

// get sends one attempt; code is 0 on a timeout or a transport error.
func get(ctx context.Context, c *http.Client, url string, n int64) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+strconv.FormatInt(n, 10), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// httpRun is what one contender's run recorded, per phase.
type httpRun struct {
	name     string
	capacity float64 // measured before the run, requests per second
	mu       sync.Mutex
	ph       []httpTally
}

type httpTally struct {
	good, attempts, refused int
	lat                     []float64 // latency of the successes arriving after the phase's first quarter, ns
}

// runContender drives one contender: open-loop Poisson arrivals at each
// phase's load of capacity, each a goroutine that tries, and retries as
// the phase says, until a 200, a failure without retry, or its attempts
// run out.
func runContender(ctx context.Context, o HTTPOptions, iters int64, capacity float64, round uint64, c sim.OverloadContender) (*httpRun, error) {
	adm := c.New(time.Now, o.Seed+round, func() int { return o.Fixed })
	s, err := startServer(adm)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	cl := newClient(o)
	defer cl.CloseIdleConnections()
	run := &httpRun{name: c.Name, ph: make([]httpTally, len(httpPhases))}
	arrivals := rand.New(rand.NewPCG(o.Seed+round, 1))
	draws := rand.New(rand.NewPCG(o.Seed+round, 2))
	sem := make(chan struct{}, o.MaxOutstanding)
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range httpPhases {
		length := o.Phase
		if i == 0 {
			length = o.Warmup
		}
		phaseStart := time.Since(start)
		for at := phaseStart; at < phaseStart+length && ctx.Err() == nil; {
			time.Sleep(time.Until(start.Add(at)))
			n, jitter := work(o, iters, draws), draws.Uint64()
			steady := at >= phaseStart+length/4
			select {
			case sem <- struct{}{}:
				wg.Go(func() {
					defer func() { <-sem }()
					run.request(ctx, o, cl, s.url, n, i, p.retry, steady, jitter)
				})
			default:
				run.mu.Lock()
				run.ph[i].attempts++ // the client's own bound: a failure, not sent
				run.mu.Unlock()
			}
			at += time.Duration(arrivals.ExpFloat64() * float64(time.Second) / (p.load * capacity))
		}
	}
	wg.Wait()
	return run, ctx.Err()
}

// request is one client request of phase i: its attempts, their
// refusals, and its success and latency.
func (r *httpRun) request(ctx context.Context, o HTTPOptions, c *http.Client, url string, n int64, i int, mode retryMode, steady bool, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	start := time.Now()
	attempts, refused, ok := 0, 0, false
	for a := 0; ; a++ {
		attempts++
		code, _ := get(ctx, c, url, n)
		if code == http.StatusOK {
			ok = true
			break
		}
		if code == http.StatusServiceUnavailable {
			refused++
		}
		if mode == noRetry || a >= o.Retries || ctx.Err() != nil {
			break
		}
		if mode == backoff {
			time.Sleep(time.Duration(rng.Float64() * float64(o.Backoff<<a)))
		}
	}
	lat := time.Since(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &r.ph[i]
	t.attempts += attempts
	t.refused += refused
	if ok {
		t.good++
		if steady {
			t.lat = append(t.lat, float64(lat))
		}
	}
}

// percentileOf returns the p-th percentile of v (NaN if empty).
func percentileOf(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, max(0, int(math.Ceil(p*float64(len(s))))-1))]
}

// httpRows summarizes one round: goodput as a share of the capacity
// measured before the run, over oracle-fixed's share; p50 and p99 over
// the contender's own at 0.5x.
func httpRows(runs []*httpRun, phase time.Duration) ([]Row, error) {
	var ref *httpRun
	for _, r := range runs {
		if r.name == sim.OracleName {
			ref = r
		}
	}
	if ref == nil {
		return nil, fmt.Errorf("overload: http model: no %s, the reference of every goodput", sim.OracleName)
	}
	var rows []Row
	for _, r := range runs {
		p50, p99 := percentileOf(r.ph[1].lat, 0.5), percentileOf(r.ph[1].lat, 0.99)
		for i := 1; i < len(httpPhases); i++ {
			t := r.ph[i]
			row := Row{Model: "http", Limiter: r.name, Phase: httpPhases[i].name, Goodput: float64(t.good) / phase.Seconds(),
				GoodputRatio: math.NaN(), P50Ratio: percentileOf(t.lat, 0.5) / p50, P99Ratio: percentileOf(t.lat, 0.99) / p99,
				RefusalRate: math.NaN(), Rounds: 1}
			if g := ref.ph[i].good; g > 0 {
				row.GoodputRatio = float64(t.good) / r.capacity / (float64(g) / ref.capacity)
			}
			if t.attempts > 0 {
				row.RefusalRate = float64(t.refused) / float64(t.attempts)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}
