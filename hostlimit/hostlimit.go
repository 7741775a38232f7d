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
	"sync/atomic"
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
	// (Announce): send what it takes now and then go as it comes back
	// (BudgetPace, the zero value), or the same but wait for a token
	// bucket to be full again before sending it (BudgetSpend). Either way
	// no more is sent than remains.
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
	// BudgetPace sends what the server says it takes now, as fast as the
	// concurrency allows, and then goes at the pace the budget comes
	// back: a token bucket's requests one by one at its refill rate, a
	// window's quota at its reset. A job ends as soon as the announced
	// limit allows.
	BudgetPace BudgetMode = iota
	// BudgetSpend is BudgetPace but for a token bucket, which it spends
	// and then waits for it to be full again, in bursts of its size.
	// Either way no more than what remains is sent, so nothing is refused.
	BudgetSpend
)

// maxSpendRate is the rate of a host spending an announced budget: the
// budget and the concurrency are what hold it.
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

	mu         sync.Mutex
	inflight   int           // requests holding a slot
	wake       chan struct{} // closed when a slot frees up
	pausedAt   time.Time     // start of the latest pause
	pauseUntil time.Time
	rampEnd    time.Time // the ramp runs from pauseUntil to rampEnd
	throttles  int       // 429/503s in a row, for the pause backoff
	pauses     int
	lastUsed   time.Time

	// budgets are what the server announced of its budgets (Announce),
	// by name ("" for the unnamed one), at most MaxResources; routes
	// maps a route to the budget its answers last named, at most
	// MaxRoutes.
	budgets map[string]*budget
	routes  map[string]*budget
	dflt    *budget // the budget most routes map to, nil if none
	unnamed *budget // budgets[""], never evicted
	// announced is set by the first answer announcing a budget: until
	// then every request is paced by the unnamed budget, found without
	// h.mu.
	announced atomic.Bool
	annWake   chan struct{} // closed when an answer changes a budget
	// concCap caps the requests in flight (0: none) after a refusal that
	// the announced budget does not explain, set at capAt.
	concCap int
	capAt   time.Time
	// askedCap caps the requests in flight as the server's own guide
	// asks (Budget.MaxInFlight; 0: none).
	askedCap int
	// sending counts the permits held: the requests sent and not yet
	// Done, whose slots the caps above count.
	sending int
	// afterPause: the next request follows a pause for a refusal.
	afterPause bool
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
		h = &host{key: key, wake: make(chan struct{}), annWake: make(chan struct{}),
			routes: make(map[string]*budget), unnamed: newBudget("")}
		h.budgets = map[string]*budget{"": h.unnamed}
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
	b     *budget // the budget that paced it
	route string
	// answered is the budget its answer named (Announce), if any.
	answered *budget
	start    time.Time
	seq      uint64         // b's permits issued before this one, and it
	tok      adaptive.Token // the adaptive concurrency limit's, if any
	once     sync.Once
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
// fails (unless FailOpen). It is AcquireRoute with the route "".
func (l *Limiter) Acquire(ctx context.Context, host string) (*Permit, error) {
	return l.AcquireRoute(ctx, host, "")
}

// AcquireRoute is Acquire for a request on route, a key the caller
// chooses for the requests that count against the same budget of the
// server (package httpclient uses the method and the first segment of the
// path). The request waits for the budget the answers to route's
// requests last named (Permit.Announce with a Budget's Resource), else
// for the host's unnamed budget; it waits for it without holding a
// concurrency slot, so that requests waiting for a spent budget do not
// hold back those of another.
func (l *Limiter) AcquireRoute(ctx context.Context, host, route string) (*Permit, error) {
	h := l.host(host, time.Now())
	for {
		if err := h.waitPause(ctx); err != nil {
			return nil, err
		}
		b, err := l.waitAnnounced(ctx, h, route)
		if err != nil {
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
		p, err := l.takeToken(ctx, h, b, route)
		if p != nil || err != nil {
			if err != nil {
				tok.Ignore()
				h.release()
			}
			if p != nil {
				p.tok, p.route = tok, route
			}
			return p, err
		}
		tok.Ignore()
		h.release() // a pause began, or the budget is spent: wait it out
	}
}

// takeToken waits for a token of h's bucket for a request paced by b.
// Only one request per budget waits for the bucket at a time (b's gate),
// so that each token costs one wake-up, not one per waiting request. It
// returns nil, nil when a pause begins meanwhile, b has no request to
// spare now, or an answer made another budget route's.
func (l *Limiter) takeToken(ctx context.Context, h *host, b *budget, route string) (*Permit, error) {
	select {
	case b.gate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.gate }()
	for {
		now := time.Now()
		if h.paused(now) {
			return nil, nil
		}
		h.mu.Lock()
		// A cap that came after this request took its slot holds it
		// back too.
		spare := h.routeBudget(route, now) == b && b.ann.wait(now, l.o.BudgetMode, b.seq+1) <= 0 && h.sending < h.capped(math.MaxInt)
		skip := spare && h.skipBucket(b, now)
		h.mu.Unlock()
		if !spare {
			return nil, nil
		}
		if skip {
			return l.permit(h, b, now), nil
		}
		d, err := l.store.Apply(ctx, ratelimit.Request{
			Key:       l.o.KeyPrefix + h.key,
			Limit:     l.limit(h, b, now),
			Algorithm: ratelimit.TokenBucket,
			N:         1,
		})
		if err != nil {
			if l.o.FailOpen && ctx.Err() == nil {
				return l.permit(h, b, now), nil
			}
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrStore, h.key, err)
		}
		if d.Allowed {
			return l.permit(h, b, now), nil
		}
		wait := d.RetryAfter
		if wait <= 0 {
			wait = time.Millisecond
		}
		// An answer announcing a budget may end the wait sooner.
		h.mu.Lock()
		wake := h.annWake
		h.mu.Unlock()
		if err := sleepOrWake(ctx, wait, wake); err != nil {
			return nil, err
		}
	}
}

// waitAnnounced waits until the server's announced budget that paces
// route takes a request from h, and returns it.
func (l *Limiter) waitAnnounced(ctx context.Context, h *host, route string) (*budget, error) {
	if !h.announced.Load() {
		return h.unnamed, nil
	}
	var b *budget
	for range maxAnnouncedWaits {
		h.mu.Lock()
		now := time.Now()
		b = h.routeBudget(route, now)
		w := b.ann.wait(now, l.o.BudgetMode, b.seq+1)
		wake := h.annWake
		h.mu.Unlock()
		if w <= 0 {
			return b, nil
		}
		if err := sleepOrWake(ctx, w, wake); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// maxAnnouncedWaits bounds the waits of one request for announced
// budgets: each ends at a reset, a refill or an answer.
const maxAnnouncedWaits = 1000

// skipBucket reports whether h's next request goes without a token of
// the bucket in the store: when the budget the server announced is all
// that holds h (its rate is adaptive, a guess the announcement replaces,
// and no Crawl-delay caps it), the bucket's state, from the slower guess,
// would hold it back; and, once, for the first request after a pause for
// a refusal, whose wait the pause was (the backoff schedule's step), not
// the bucket whose rate the refusal lowered for the requests after it.
// h.mu is held.
func (h *host) skipBucket(b *budget, now time.Time) bool {
	if h.afterPause {
		h.afterPause = false
		return true
	}
	return h.ctrl != nil && h.ceiling == 0 && b.ann.active(now)
}

// sleepOrWake waits for d, until wake is closed or ctx ends.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limiter) permit(h *host, b *budget, now time.Time) *Permit {
	h.mu.Lock()
	h.lastUsed = now
	h.sending++
	b.sent++
	b.seq++
	seq := b.seq
	b.ann.take(now)
	b.live = append(b.live, seq)
	h.mu.Unlock()
	return &Permit{l: l, h: h, b: b, start: now, seq: seq}
}

// limit returns the host's current bucket limit for a request paced by b.
func (l *Limiter) limit(h *host, b *budget, now time.Time) ratelimit.Limit {
	rate := l.o.Rate
	if h.ctrl != nil {
		rate = h.ctrl.Rate()
	}
	var pacedBurst int64
	h.mu.Lock()
	if b.ann.active(now) && h.ctrl != nil {
		// The server said what it will take: the announced budget holds
		// the host, not the adaptive guess (a fixed rate still caps it).
		rate, pacedBurst = maxSpendRate, int64(l.o.Concurrency)
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
	sig := p.hostSignal(f.Signal, now)
	switch {
	case sig == adaptive.Success:
		if f.Latency > 0 {
			p.tok.DoneRTT(f.Latency)
		} else {
			p.tok.Done()
		}
	case sig.Congestion():
		p.tok.Dropped()
	default:
		p.tok.Ignore()
	}
	if h.ctrl != nil {
		if f.Latency <= 0 && sig != adaptive.Neutral {
			f.Latency = now.Sub(p.start)
		}
		h.ctrl.OnResponse(now, adaptive.Sample{Signal: sig, Latency: f.Latency, RetryAfter: f.RetryAfter})
	}
	var paused time.Duration
	h.mu.Lock()
	switch f.Signal {
	case adaptive.Throttled:
		paused = l.throttled(p, max(f.RetryAfter, 0), now)
	case adaptive.Success:
		h.throttles = 0
	}
	h.inflight--
	h.sending--
	b := p.b
	b.sent--
	if i := slices.Index(b.live, p.seq); i >= 0 {
		b.live[i] = b.live[len(b.live)-1]
		b.live = b.live[:len(b.live)-1]
	}
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

// hostSignal is what an answer signalling sig, at now, says of p's host
// for its adaptive rate and concurrency: a refusal by a named budget
// that is spent (search, with core to spare) says that budget is spent,
// which its model holds, and nothing of the host: it is Neutral.
func (p *Permit) hostSignal(sig adaptive.Signal, now time.Time) adaptive.Signal {
	if sig != adaptive.Throttled {
		return sig
	}
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	if p.spentNamed(now) {
		return adaptive.Neutral
	}
	return sig
}

// spentNamed reports whether the budget that answered p (or paced it) is
// a named one, spent at now. The host's mu is held.
func (p *Permit) spentNamed(now time.Time) bool {
	b := p.b
	if p.answered != nil {
		b = p.answered
	}
	return b.name != "" && b.ann.active(now) && b.ann.tokens(now) < 1
}

// throttled applies a refusal of p's request, answered at now with the
// delay ra, and returns the pause of the host it starts (0 if none). The
// host's mu is held.
func (l *Limiter) throttled(p *Permit, ra time.Duration, now time.Time) time.Duration {
	h, b := p.h, p.b
	if p.answered != nil {
		b = p.answered
	}
	if b.ann.misaligned(p.start) {
		b.margin = 2 * b.alignMargin()
		if b.margin == 0 {
			b.margin = 2 * maxAlignMargin
		}
	}
	if b.ann.active(now) && b.ann.tokens(now) > 0 && !p.start.Before(h.capAt) {
		// Refused with the announced budget not spent: another limit,
		// as GitHub's secondary one, on requests at once. Halve what
		// was in flight (once for the requests sent together).
		h.concCap, h.capAt = max(1, h.inflight/2), now
	}
	if p.spentNamed(now) {
		// Refused by a named budget that is spent: it holds its own
		// routes until its reset; the host's other budgets are not
		// paused for it.
		return 0
	}
	if p.start.Before(h.pausedAt) {
		// Sent before the current pause began: its 429 is old news,
		// though its Retry-After still counts.
		if until := now.Add(ra); until.After(h.pauseUntil) {
			h.pauseUntil = until
			h.setRamp(l.o.Ramp)
		}
		return 0
	}
	h.throttles++
	paused := max(ra, l.o.Pause.Delay(h.throttles))
	h.pausedAt = now
	h.pauseUntil = now.Add(paused)
	h.pauses++
	h.afterPause = true
	h.setRamp(l.o.Ramp)
	return paused
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
		limit = h.capped(limit)
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

// capped is limit under the host's caps on requests in flight: one learnt
// from refusals, one the server asks for. h.mu is held.
func (h *host) capped(limit int) int {
	for _, c := range [...]int{h.concCap, h.askedCap} {
		if c > 0 {
			limit = min(limit, c)
		}
	}
	return limit
}

func (h *host) release() {
	h.mu.Lock()
	h.inflight--
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
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
		s.MaxInFlight = h.capped(s.MaxInFlight)
		if r, ok := h.pace(now); ok && (h.ctrl != nil || r < s.Rate) {
			s.Rate, s.Paced = r, true
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
