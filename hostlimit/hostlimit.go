package hostlimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
)

// Defaults of the zero Options.
const (
	DefaultConcurrency = 4
	DefaultRamp        = 5 * time.Second
	DefaultMaxHosts    = 10000
	DefaultKeyPrefix   = "sluice:host:"
)

// ErrStore is matched by the errors Acquire returns when the Store fails
// (and FailOpen is false).
var ErrStore = errors.New("hostlimit: store failed")

// Options configures a Limiter. The zero value is the default: an adaptive
// rate per host starting at 2 requests a second, a burst of 20 ms of it, 4 requests
// in flight per host, a 5 s ramp after each pause, state in process.
type Options struct {
	// Rate is each host's rate, in requests per second. Zero means
	// adaptive: an AIMD controller per host, configured by Adaptive.
	Rate float64
	// Burst is the most requests a host's bucket lets start at once. Zero
	// means 20 ms worth at the current rate, at least 1: enough to absorb
	// timer lateness (which at burst 1 is capacity lost for good), small
	// enough not to bunch requests at the server.
	Burst int
	// Concurrency is the most requests in flight per host. Zero means
	// DefaultConcurrency (4).
	Concurrency int
	// Adaptive configures the per-host AIMD controllers when Rate is zero.
	Adaptive adaptive.Options
	// AdaptiveConcurrency, when set, makes each host's cap on requests in
	// flight adaptive instead of Concurrency: it is called once per host
	// for its limiter (adaptive.NewGradient or adaptive.NewVegas), which
	// follows the latency the host's answers take. A success is a latency
	// sample; a 429, 503, 5xx or timeout is a drop.
	AdaptiveConcurrency func() adaptive.Limiter
	// Pause gives the pause after the n-th 429/503 in a row from a host
	// (n from 1) when it is longer than the answer's Retry-After. Nil means
	// backoff.Recommended (0.5–1 s, 1–2 s, …).
	Pause backoff.Strategy
	// Ramp is how long a host takes to come back to full concurrency (and
	// full rate, when fixed) after a pause. Zero means DefaultRamp (5 s);
	// negative disables the ramp.
	Ramp time.Duration
	// Store holds the token buckets. Nil means a private in-process store.
	// Share a redisstore between processes to share each host's budget.
	Store ratelimit.Store
	// KeyPrefix is prepended to each host key in the Store. Empty means
	// DefaultKeyPrefix.
	KeyPrefix string
	// FailOpen lets requests start when the Store fails, instead of
	// failing them with ErrStore. The semaphore and pauses still apply.
	FailOpen bool
	// MaxHosts bounds the hosts whose state is kept; idle hosts beyond it
	// are forgotten (an adaptive one restarts from Adaptive.Initial). Zero
	// means DefaultMaxHosts.
	MaxHosts int
	// BudgetMode says what to do with a budget a server announces
	// (Announce): pace it over its window (BudgetPace, the zero value) or
	// spend it as fast as the concurrency allows and then wait for the
	// reset (BudgetSpend). Either way no more is sent than remains.
	BudgetMode BudgetMode
	// OnPause, when set, is called when a host pauses, with the pause's
	// length.
	OnPause func(host string, d time.Duration)
	// Logger receives debug records of pauses. Nil means no logging.
	Logger *slog.Logger
}

// BudgetMode is how a Limiter uses a budget a server announced.
type BudgetMode uint8

const (
	// BudgetPace spreads what remains of a window's budget evenly until
	// its reset (a token bucket's at its refill rate): smooth for the
	// server, and a long job takes the windows its requests need.
	BudgetPace BudgetMode = iota
	// BudgetSpend sends what remains at once, as fast as the concurrency
	// allows, and then waits for the reset: a short job ends up to one
	// window sooner than paced, in bursts at each window's start. Still no
	// more than what remains is sent, so nothing is refused.
	BudgetSpend
)

// maxSpendRate is the rate of a host spending an announced budget: the
// credit and the concurrency are what hold it.
const maxSpendRate = 1e6

// Limiter limits requests per host. It is safe for concurrent use.
type Limiter struct {
	o     Options
	store ratelimit.Store

	mu    sync.Mutex
	hosts map[string]*host
}

type host struct {
	key  string
	ctrl *adaptive.AIMD   // nil with a fixed rate
	conc adaptive.Limiter // nil with a fixed concurrency

	gate chan struct{} // held by the one request waiting for the bucket

	mu         sync.Mutex
	inflight   int           // requests holding a slot
	sent       int           // requests holding a permit (past the bucket)
	seq        uint64        // permits issued
	wake       chan struct{} // closed when a slot frees up
	pausedAt   time.Time     // start of the latest pause
	pauseUntil time.Time
	rampEnd    time.Time // the ramp runs from pauseUntil to rampEnd
	throttles  int       // 429/503s in a row, for the pause backoff
	pauses     int
	lastUsed   time.Time

	// The server's announced budget (Announce): until budgetUntil, the
	// host is paced at budgetRate.
	budgetRate  float64
	budgetBurst int64
	budgetUntil time.Time
	// credit is what the latest announced window budget leaves for
	// requests not yet sent; until creditUntil, the host pauses when it
	// is spent, so that bursts between answers never send more than
	// remains.
	credit       int64
	creditUntil  time.Time
	creditPaused bool // the current pause is the credit's, lifted by new credit
	// The window the latest answers speak of, and the fewest requests
	// any of them said remain in it: answers arrive out of order, and an
	// older one's larger count is stale.
	winEnd time.Time
	winMin int64
	// ceiling caps the host's rate (a robots.txt Crawl-delay); 0 is none.
	ceiling float64
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.Burst < 0 {
		o.Burst = 0
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Pause == nil {
		o.Pause = backoff.Recommended()
	}
	if o.Ramp == 0 {
		o.Ramp = DefaultRamp
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.MaxHosts <= 0 {
		o.MaxHosts = DefaultMaxHosts
	}
	if !(o.Rate >= 0) || math.IsInf(o.Rate, 0) {
		o.Rate = 0
	}
	store := o.Store
	if store == nil {
		// No sweeper and no cached clock, so no goroutine: the key bound
		// is enough for a client, a client's rate does not need the cached
		// clock, and the Limiter needs no Close.
		store = memstore.New(memstore.Options{SweepInterval: -1, Resolution: -1, MaxKeys: 4 * o.MaxHosts})
	}
	return &Limiter{o: o, store: store, hosts: make(map[string]*host)}
}

func (l *Limiter) host(key string, now time.Time) *host {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hosts[key]
	if h == nil {
		if len(l.hosts) >= l.o.MaxHosts {
			l.evict(now)
		}
		h = &host{key: key, wake: make(chan struct{}), gate: make(chan struct{}, 1)}
		if l.o.Rate == 0 {
			h.ctrl = adaptive.NewAIMD(l.o.Adaptive)
		}
		if l.o.AdaptiveConcurrency != nil {
			h.conc = l.o.AdaptiveConcurrency()
		}
		l.hosts[key] = h
	}
	return h
}

// evict forgets idle hosts, the least recently used first, down to 3/4 of
// MaxHosts. l.mu is held.
func (l *Limiter) evict(now time.Time) {
	type idle struct {
		key  string
		used time.Time
	}
	var cands []idle
	for k, h := range l.hosts {
		h.mu.Lock()
		if h.inflight == 0 && !now.Before(h.rampEnd) {
			cands = append(cands, idle{k, h.lastUsed})
		}
		h.mu.Unlock()
	}
	slices.SortFunc(cands, func(a, b idle) int { return a.used.Compare(b.used) })
	for _, c := range cands {
		if len(l.hosts) < l.o.MaxHosts*3/4 {
			break
		}
		delete(l.hosts, c.key)
	}
}

// Permit is a started request's hold on its host. Call Done exactly once.
type Permit struct {
	l     *Limiter
	h     *host
	start time.Time
	seq   uint64         // the host's permits issued before this one
	tok   adaptive.Token // the adaptive concurrency limit's, if any
	once  sync.Once
}

// Feedback is what a request's answer says about its host.
type Feedback struct {
	Signal     adaptive.Signal
	Latency    time.Duration // time to the answer; 0 if unknown
	RetryAfter time.Duration // the server's delay, if it gave one
}

// Acquire waits until a request to host may start: the host is not paused,
// a concurrency slot is free and its bucket has a token. It returns ctx's
// error if ctx ends first, and an error wrapping ErrStore if the store
// fails (unless FailOpen).
func (l *Limiter) Acquire(ctx context.Context, host string) (*Permit, error) {
	h := l.host(host, time.Now())
	for {
		if err := h.waitPause(ctx); err != nil {
			return nil, err
		}
		limit := l.o.Concurrency
		if h.conc != nil {
			limit = max(1, h.conc.Limit())
		}
		if err := h.acquireSlot(ctx, limit); err != nil {
			return nil, err
		}
		var tok adaptive.Token
		if h.conc != nil {
			var ok bool
			if tok, ok = h.conc.Acquire(); !ok {
				// The limit fell since it was read: wait for the next
				// release (someone holds a token, or Acquire would not
				// refuse).
				h.release()
				h.mu.Lock()
				wake := h.wake
				h.mu.Unlock()
				select {
				case <-wake:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				continue
			}
		}
		p, err := l.takeToken(ctx, h)
		if p != nil || err != nil {
			if err != nil {
				tok.Ignore()
				h.release()
			}
			if p != nil {
				p.tok = tok
			}
			return p, err
		}
		tok.Ignore()
		h.release() // a pause began: wait it out
	}
}

// takeToken waits for a token of h's bucket. Only one request per host
// waits for the bucket at a time (the gate), so that each token costs one
// wake-up, not one per waiting request. It returns nil, nil when a pause
// begins meanwhile.
func (l *Limiter) takeToken(ctx context.Context, h *host) (*Permit, error) {
	select {
	case h.gate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.gate }()
	for {
		now := time.Now()
		if h.paused(now) {
			return nil, nil
		}
		d, err := l.store.Apply(ctx, ratelimit.Request{
			Key:       l.o.KeyPrefix + h.key,
			Limit:     l.limit(h, now),
			Algorithm: ratelimit.TokenBucket,
			N:         1,
		})
		if err != nil {
			if l.o.FailOpen && ctx.Err() == nil {
				return l.permit(h, now), nil
			}
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrStore, h.key, err)
		}
		if d.Allowed {
			return l.permit(h, now), nil
		}
		wait := d.RetryAfter
		if wait <= 0 {
			wait = time.Millisecond
		}
		if err := retry.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (l *Limiter) permit(h *host, now time.Time) *Permit {
	h.mu.Lock()
	h.lastUsed = now
	h.sent++
	h.seq++
	seq := h.seq
	if now.Before(h.creditUntil) {
		h.credit--
		if h.credit <= 0 && h.creditUntil.After(h.pauseUntil) {
			h.pauseUntil, h.creditPaused = h.creditUntil, true
			if h.rampEnd.Before(h.pauseUntil) {
				h.rampEnd = h.pauseUntil
			}
		}
	}
	h.mu.Unlock()
	return &Permit{l: l, h: h, start: now, seq: seq}
}

// limit returns the host's current bucket limit.
func (l *Limiter) limit(h *host, now time.Time) ratelimit.Limit {
	rate := l.o.Rate
	if h.ctrl != nil {
		rate = h.ctrl.Rate()
	}
	var pacedBurst int64
	h.mu.Lock()
	if now.Before(h.budgetUntil) {
		// The server said what it will take: its pace replaces the
		// adaptive guess and caps a fixed rate. Spending, the credit
		// bounds the host and the rate is as high as a bucket takes.
		if math.IsInf(h.budgetRate, 1) {
			if h.ctrl != nil {
				rate, pacedBurst = maxSpendRate, max(h.credit, 1)
			}
		} else if h.ctrl != nil || h.budgetRate < rate {
			rate, pacedBurst = h.budgetRate, max(h.budgetBurst, 1)
		}
	}
	if h.ceiling > 0 && rate > h.ceiling {
		rate, pacedBurst = h.ceiling, 1
	}
	h.mu.Unlock()
	burst := int64(l.o.Burst)
	if pacedBurst > 0 {
		burst = pacedBurst
	}
	if burst == 0 {
		burst = max(1, int64(math.Ceil(rate/50)))
	}
	if f, ramping := h.ramp(now); ramping {
		// The burst grows from 1 with the ramp, like the concurrency.
		burst = 1 + int64(f*float64(burst-1))
		if h.ctrl == nil {
			rate *= 0.25 + 0.75*f
		}
	}
	interval := time.Duration(float64(time.Second) / max(rate, 1e-3))
	interval = min(max(interval, time.Microsecond), ratelimit.MaxPeriod/time.Duration(burst))
	return ratelimit.Limit{Rate: 1, Period: interval, Burst: burst}
}

// Done releases the permit and feeds the answer to the host's controller
// and pause. Calls after the first do nothing.
func (p *Permit) Done(f Feedback) {
	p.once.Do(func() { p.l.done(p, f) })
}

func (l *Limiter) done(p *Permit, f Feedback) {
	h, now := p.h, time.Now()
	switch {
	case f.Signal == adaptive.Success:
		if f.Latency > 0 {
			p.tok.DoneRTT(f.Latency)
		} else {
			p.tok.Done()
		}
	case f.Signal.Congestion():
		p.tok.Dropped()
	default:
		p.tok.Ignore()
	}
	if h.ctrl != nil {
		if f.Latency <= 0 && f.Signal != adaptive.Neutral {
			f.Latency = now.Sub(p.start)
		}
		h.ctrl.OnResponse(now, adaptive.Sample{Signal: f.Signal, Latency: f.Latency, RetryAfter: f.RetryAfter})
	}
	var paused time.Duration
	h.mu.Lock()
	switch f.Signal {
	case adaptive.Throttled:
		ra := max(f.RetryAfter, 0)
		if p.start.Before(h.pausedAt) {
			// Sent before the current pause began: its 429 is old news,
			// though its Retry-After still counts.
			if until := now.Add(ra); until.After(h.pauseUntil) {
				h.pauseUntil = until
				h.setRamp(l.o.Ramp)
			}
			break
		}
		h.throttles++
		paused = max(ra, l.o.Pause.Delay(h.throttles))
		h.pausedAt = now
		h.pauseUntil = now.Add(paused)
		h.pauses++
		h.setRamp(l.o.Ramp)
	case adaptive.Success:
		h.throttles = 0
	}
	h.inflight--
	h.sent--
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
	if paused > 0 {
		if l.o.OnPause != nil {
			l.o.OnPause(h.key, paused)
		}
		if l.o.Logger != nil {
			l.o.Logger.Debug("hostlimit: pause", "host", h.key, "pause", paused, "retry_after", f.RetryAfter)
		}
	}
}

// setRamp starts the ramp at the end of the pause. h.mu is held.
func (h *host) setRamp(ramp time.Duration) {
	h.rampEnd = h.pauseUntil.Add(max(ramp, 0))
}

// ramp reports how far the host is through its ramp (0 to 1), and whether
// it is ramping at all.
func (h *host) ramp(now time.Time) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !now.Before(h.rampEnd) || now.Before(h.pauseUntil) {
		return 1, false
	}
	total := h.rampEnd.Sub(h.pauseUntil)
	return float64(now.Sub(h.pauseUntil)) / float64(total), true
}

func (h *host) paused(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return now.Before(h.pauseUntil)
}

func (h *host) waitPause(ctx context.Context) error {
	for {
		h.mu.Lock()
		wait := time.Until(h.pauseUntil)
		h.mu.Unlock()
		if wait <= 0 {
			return ctx.Err()
		}
		if err := retry.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// acquireSlot takes a concurrency slot. During a ramp the number of slots
// grows linearly from a quarter of limit (at least 1) to limit.
func (h *host) acquireSlot(ctx context.Context, limit int) error {
	for {
		now := time.Now()
		h.mu.Lock()
		slots, recheck := limit, time.Duration(0)
		if now.Before(h.rampEnd) && !now.Before(h.pauseUntil) && limit > 1 {
			total := h.rampEnd.Sub(h.pauseUntil)
			f := float64(now.Sub(h.pauseUntil)) / float64(total)
			first := max(1, limit/4)
			slots = first + int(f*float64(limit-first))
			recheck = total / time.Duration(limit-1)
		}
		if h.inflight < slots {
			h.inflight++
			h.mu.Unlock()
			return nil
		}
		wake := h.wake
		h.mu.Unlock()
		var timer *time.Timer
		var tick <-chan time.Time
		if recheck > 0 {
			timer = time.NewTimer(recheck)
			tick = timer.C
		}
		var err error
		select {
		case <-wake:
		case <-tick:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return err
		}
	}
}

func (h *host) release() {
	h.mu.Lock()
	h.inflight--
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
}

// Budget is what a host's server announced about a client's allowance:
// the RateLimit or X-RateLimit-* fields of an answer (package httpclient
// reads them).
type Budget struct {
	Remaining int64         // requests the server will still take before Reset
	Reset     time.Duration // until the allowance is back (the window's end, or the bucket full)
	Limit     int64         // the policy's quota; 0 if not announced
	Window    time.Duration // the policy's window; 0 if not announced
}

// bucket reports whether b reads as a token bucket rather than a window:
// its Reset is the time the missing requests take to come back at
// Limit/Window, as a bucket's "until full" is, give or take the rounding
// to seconds and one interval. Below 2 s that rounding cannot tell the
// two apart, and a window is the safer reading. A window read as a bucket
// is paced at its average rate, which a client that paced it so far
// (whose remaining requests fall with the time left, as a bucket's would)
// can keep.
func (b Budget) bucket() bool {
	if b.Limit <= 0 || b.Window <= 0 || b.Remaining > b.Limit {
		return false
	}
	interval := b.Window / time.Duration(b.Limit)
	full := time.Duration(b.Limit-b.Remaining) * interval
	return full >= 2*time.Second && (b.Reset-full).Abs() <= time.Second+interval
}

// Announce tells the Limiter what host's server announced at now about
// its budget, so that the host is paced by it rather than by the hits of
// its limit:
//
//   - a window (Remaining requests until Reset, then a fresh quota): what
//     remains, less what the requests already sent will use, is spread
//     evenly until the reset; a spent one pauses the host until then;
//   - a token bucket (its Reset is how long the missing requests take to
//     come back at Limit per Window): the host is paced at Limit/Window,
//     the rate the server refills at; a spent one pauses the host for one
//     refill.
//
// With an adaptive rate the pace replaces it; a fixed rate is capped by it.
// The pause after a spent budget has no ramp. A Reset of 0 or less says
// nothing and is ignored.
//
// Limiter.Announce cannot tell which requests in flight the server had
// counted, and assumes none; Permit.Announce, for the answer to that
// permit's request, assumes those sent before it were.
func (l *Limiter) Announce(host string, b Budget, now time.Time) {
	if b.Reset <= 0 {
		return
	}
	l.announce(l.host(host, now), b, now, -1)
}

// Announce is Limiter.Announce for the answer to p's request: the server
// counted it and, in all likelihood, the requests sent before it, so only
// those sent after it may be missing from Remaining. Call it before Done.
func (p *Permit) Announce(b Budget, now time.Time) {
	if b.Reset <= 0 {
		return
	}
	p.l.announce(p.h, b, now, int64(p.seq))
}

// announce applies b to h. seq is the permit the answer is for, or -1 when
// unknown.
func (l *Limiter) announce(h *host, b Budget, now time.Time, seq int64) {
	paceReset := b.Reset
	if b.Reset >= time.Second && b.Reset%time.Second == 0 {
		// Whole seconds are rounded up: the true time left is anywhere in
		// the second before. Pace to the middle of it. Pacing a little
		// fast refuses nothing, since no more than what remains is sent
		// (and pauses last to the rounded-up reset); pacing to it leaves a
		// quarter of a short window's quota unused.
		paceReset -= time.Second / 2
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if end := now.Add(b.Reset); !b.bucket() && !h.winEnd.IsZero() && end.Sub(h.winEnd).Abs() <= time.Second {
		b.Remaining = min(b.Remaining, h.winMin) // the same window: remaining only falls
		h.winMin = b.Remaining
	} else {
		h.winEnd, h.winMin = end, b.Remaining
	}
	// Requests that may be missing from Remaining: all the others in
	// flight, or with the permit known, those sent after it.
	unseen := int64(max(h.sent-1, 0))
	if seq >= 0 {
		unseen = int64(h.seq) - seq
	}
	avail := b.Remaining - unseen
	pause, until := b.Reset, now.Add(b.Reset)
	bucket := b.bucket()
	if bucket {
		pause = b.Window / time.Duration(b.Limit)
		until = now.Add(max(b.Reset, b.Window))
	}
	if avail <= 0 {
		if end := now.Add(pause); end.After(h.pauseUntil) {
			h.pauseUntil = end
			if h.rampEnd.Before(end) {
				h.rampEnd = end
			}
			// With requests remaining at the server, the requests in
			// flight may already be counted in them: a later answer that
			// says so lifts the pause.
			h.creditPaused = b.Remaining > 0 && !bucket
		}
		if !bucket {
			h.budgetRate, h.budgetUntil = 0, time.Time{}
			h.credit, h.creditUntil = 0, time.Time{}
			return
		}
		avail = 1
	}
	h.credit, h.creditUntil = avail, until
	if h.creditPaused && now.Before(h.pauseUntil) && !bucket {
		// Answers to requests sent before the credit ran out say more
		// remains than was assumed: go on.
		h.pauseUntil, h.rampEnd, h.creditPaused = now, now, false
	}
	if bucket {
		h.credit, h.creditUntil = 0, time.Time{} // it refills as it goes
	}
	if l.o.BudgetMode == BudgetSpend && !bucket {
		// No pace: the credit alone holds the host at what remains.
		h.budgetRate, h.budgetBurst, h.budgetUntil = math.Inf(1), 0, until
		return
	}
	if bucket {
		h.budgetRate, h.budgetBurst = float64(b.Limit)/b.Window.Seconds(), 1
	} else {
		// avail+1 intervals: the last request goes one interval before
		// the reset rather than at it, where a reset rounded up to the
		// second would push it into the next window.
		h.budgetRate, h.budgetBurst = float64(avail+1)/paceReset.Seconds(), 1
	}
	h.budgetUntil = until
}

// SetCeiling caps host's rate at rate requests per second, whatever the
// adaptive controller or an announced budget would allow: a robots.txt
// Crawl-delay of d is a ceiling of 1/d. Zero or less removes the cap.
func (l *Limiter) SetCeiling(host string, rate float64) {
	h := l.host(host, time.Now())
	h.mu.Lock()
	h.ceiling = max(rate, 0)
	h.mu.Unlock()
}

// HostState describes one host.
type HostState struct {
	Host        string
	Rate        float64       // current rate, requests per second
	Adaptive    bool          // the rate is found by AIMD
	InFlight    int           // requests holding a slot
	MaxInFlight int           // the cap on InFlight: Concurrency, or the adaptive limit
	Pauses      int           // pauses so far
	PausedFor   time.Duration // time left in the current pause
	Paced       bool          // Rate is set by the server: an announced budget's pace or a Crawl-delay
}

// Hosts returns the state of every host the Limiter knows, sorted by name.
func (l *Limiter) Hosts() []HostState {
	l.mu.Lock()
	hs := make([]*host, 0, len(l.hosts))
	for _, h := range l.hosts {
		hs = append(hs, h)
	}
	l.mu.Unlock()
	now := time.Now()
	out := make([]HostState, 0, len(hs))
	for _, h := range hs {
		s := HostState{Host: h.key, Rate: l.o.Rate, Adaptive: h.ctrl != nil}
		if h.ctrl != nil {
			s.Rate = h.ctrl.Rate()
		}
		h.mu.Lock()
		s.InFlight, s.Pauses, s.PausedFor = h.inflight, h.pauses, max(0, h.pauseUntil.Sub(now))
		s.MaxInFlight = l.o.Concurrency
		if h.conc != nil {
			s.MaxInFlight = h.conc.Limit()
		}
		if now.Before(h.budgetUntil) && !math.IsInf(h.budgetRate, 1) && (h.ctrl != nil || h.budgetRate < s.Rate) {
			s.Rate, s.Paced = h.budgetRate, true
		}
		if h.ceiling > 0 && s.Rate > h.ceiling {
			s.Rate, s.Paced = h.ceiling, true
		}
		h.mu.Unlock()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b HostState) int { return cmp.Compare(a.Host, b.Host) })
	return out
}

// PauseLeft returns how long host stays paused, 0 if it is not.
func (l *Limiter) PauseLeft(host string) time.Duration {
	l.mu.Lock()
	h := l.hosts[host]
	l.mu.Unlock()
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(0, time.Until(h.pauseUntil))
}

// Rate returns host's current rate in requests per second (its initial
// rate if the Limiter has not seen it yet).
func (l *Limiter) Rate(host string) float64 {
	if l.o.Rate > 0 {
		return l.o.Rate
	}
	l.mu.Lock()
	h := l.hosts[host]
	l.mu.Unlock()
	if h == nil {
		return adaptive.NewAIMD(l.o.Adaptive).Rate()
	}
	return h.ctrl.Rate()
}
