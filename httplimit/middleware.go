package httplimit

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/internal/tick"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rules"
)

// Identifier says who is calling. *identity.Resolver implements it. An
// error wrapping identity.ErrUnauthorized is answered 401.
type Identifier interface {
	Resolve(r *http.Request) (identity.Identity, error)
}

// Outcome is what happened to one rule for one request.
type Outcome uint8

const (
	Allowed      Outcome = iota // the rule admitted the request
	Denied                      // the rule denied the request (429)
	ShadowDenied                // the rule would have denied; it is in shadow mode
	StoreError                  // the store failed; see Middleware.OnStoreError
)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "store_error", "refunded", "refund_refused"}

// String returns allowed, denied, shadow_denied, store_error, refunded or
// refund_refused.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Event reports one rule's decision for one request to Middleware.Observe.
type Event struct {
	Rule     *rules.Rule
	Policy   string // the policy name shown in headers and problem bodies
	Outcome  Outcome
	Key      string             // the store key (rules.Rule.AppendKey): who was decided
	Decision ratelimit.Decision // the store's decision; zero for StoreError; the refund budget's for RefundRefused
	Err      error              // the store error, for StoreError
	// Latency is the time spent in the store; 0 when not measured (see
	// Middleware.LatencySampling).
	Latency time.Duration
	// Ctx is the request's context, for an observer that records the
	// decision on what the request carries (a server's trace span).
	Ctx context.Context
}

// SuggestedLatencySampling is a Middleware.LatencySampling for servers
// that export a latency histogram: one decision in 16 is timed.
const SuggestedLatencySampling = 16

// Middleware limits requests before they reach the next handler. Its
// fields are policies; the zero value of each is the documented default.
// Store, Rules and Descriptors are required for any limiting to happen.
//
// Handler reads the fields once: change them and call Handler again (the
// state lives in the Store, so a new handler over the same store keeps
// every counter). A Middleware's handlers are safe for concurrent use.
type Middleware struct {
	// Store decides and keeps the state.
	Store ratelimit.Store
	// Rules resolves descriptors to store requests (rules.Set.Resolve).
	// A Set bound to a store (rules.Set.Bind) decides its rules with that
	// store's bindings (a prefetch: true rule with its prefetch view); Handler
	// binds a Set that is not bound to Store.
	Rules *rules.Set
	// Domain is the rules domain the descriptors are matched in.
	Domain string
	// Descriptors build the request's descriptors; each is matched to at
	// most one rule.
	Descriptors []action.Descriptor
	// Identity resolves the caller. Nil means every caller is anonymous,
	// identified by the IP of RemoteAddr.
	Identity Identifier
	// Cost is what a request costs. 0 means 1.
	Cost int64
	// CostHeader, when set, names a request header carrying the cost (a
	// positive integer), honoured only when the peer is a trusted proxy
	// (identity.Identity.TrustedPeer): a client cannot lower its own cost.
	// When the header is absent, or sent by anyone else, Cost applies. A
	// malformed value from a trusted proxy is answered 400.
	CostHeader string
	// Headers selects the response headers. The zero value is IETF.
	Headers header.Mode
	// Shadow puts every rule in shadow mode: would-be denials are observed
	// and logged, never enforced.
	Shadow bool
	// ResetJitter spreads the Retry-After of fixed-window denials: each
	// gets a random extra wait of up to ResetJitter × the window (0.1:
	// up to 6 s on a one-minute window), so that every client denied in a
	// window does not come back at the same instant when it rolls over
	// (synchronized resets). 0, the default, adds none; it is at
	// most 1.
	ResetJitter float64
	// Disabled turns all limiting off: requests go straight to next.
	Disabled bool
	// DisabledRules names rules (by name, or by key when unnamed) that are
	// not applied.
	DisabledRules []string
	// OnStoreError is what happens when the store fails for a rule (a
	// Redis store applies its own policy first; what reaches here is what
	// it returns): FailError (the zero value) answers 503, FailDeny 503
	// "limiter unavailable" with Retry-After (Refusals.UnavailableRetryAfter)
	// and the rule's headers at r=0, FailAllow and FailLocal skip the rule.
	OnStoreError ratelimit.FailurePolicy
	// RefundOn, when set, is called with each admitted request and the
	// status of its response; when it returns true, what every rule
	// charged the request is given back (ratelimit.Request.Refund), each
	// reported to Observe as Refunded: the work did not happen, so it is
	// not counted (an upstream's 5xx: RefundStatuses(500, 502, 503, 504)).
	// RefundBudget bounds how much comes back. Nil, the default, never
	// refunds. It must be fast and safe for concurrent use.
	RefundOn func(r *http.Request, status int) bool
	// RefundBudget bounds the refunds of one caller under one rule: in
	// each window of the rule's period (aligned as a fixed_window rule's
	// windows are), at most RefundBudget × the rule's rate events are
	// given back, rounded up (so at least one). The count is kept in the
	// Store next to the rule's key (RefundBudgetRequest), so a fleet
	// sharing a Redis store shares the bound. A refund beyond it is
	// refused: the charge stands, reported to Observe as RefundRefused.
	// A caller who can make every request fail (bad input answered 500, a
	// query slow enough to time out) thus reaches the next handler at
	// most the rule's capacity plus the budget per window, not without
	// bound. 0, the default, is DefaultRefundBudget; it is at most 1 (the
	// limit itself: a caller's failures then at most double its limit).
	RefundBudget float64
	// Observe, when set, is called for every rule decision: for metrics,
	// and for logs. The middleware logs nothing per request itself (a line
	// per store failure or denial would turn an outage or a flood into a
	// logging one); the gateway aggregates Observe's store errors, shadow
	// denials and denials into a few lines per rule per interval. It must
	// be fast and safe for concurrent use.
	Observe func(Event)
	// Adjust, when set, may change each limited check of a request before
	// it is charged: its Request.Limit (the gateway's admin overrides, a
	// limit for one identity) and its Shadow (percentage enforcement). It
	// must be fast and safe for concurrent use.
	Adjust func(r *http.Request, c *rules.Check)
	// Refusals writes the 429s and 503s and reports each to its observer;
	// nil writes them and observes nothing. Give every admission layer of a
	// server the same one (see Refusals).
	Refusals *Refusals
	// Denial, when set, is the status and body of a refusal over the
	// limit in place of 429 and problem+json (see Denial); nil keeps them.
	Denial *Denial
	// LatencySampling n > 1 measures Event.Latency for one decision in n,
	// chosen at random, and leaves it 0 for the others, sparing them two
	// clock reads: a latency histogram fed from Observe then holds a
	// uniform sample of about 1/n of the decisions. 0 or 1 measures every
	// decision. Without Observe, no decision is timed.
	LatencySampling int
	// Logger logs what is not about one request (a rule that cannot be
	// resolved, an identity resolver that fails). Nil discards.
	Logger *slog.Logger
	// Now is the clock for quota periods and legacy reset times. Nil means
	// time.Now.
	Now func() time.Time
}

// Handler returns next wrapped by the limits m describes.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if m.Disabled || m.Store == nil || m.Rules == nil || len(m.Descriptors) == 0 {
		return next
	}
	h := &handler{m: *m, next: next}
	h.m.Descriptors = append([]action.Descriptor(nil), m.Descriptors...)
	if len(m.DisabledRules) > 0 {
		h.disabled = make(map[string]bool, len(m.DisabledRules))
		for _, n := range m.DisabledRules {
			h.disabled[n] = true
		}
	}
	if h.m.Cost <= 0 {
		h.m.Cost = 1
	}
	if h.m.Now == nil {
		h.m.Now = time.Now
	}
	if !(h.m.RefundBudget > 0) { // 0, negative or NaN
		h.m.RefundBudget = DefaultRefundBudget
	}
	h.m.RefundBudget = min(h.m.RefundBudget, 1)
	if h.m.Logger == nil {
		h.m.Logger = slog.New(slog.DiscardHandler)
	}
	if m.Rules.Store() == nil {
		// Bind each rule once here rather than derive its limit on every
		// request. A Set already bound (the gateway binds its own, with
		// the prefetch view) is taken as it is.
		if b, err := m.Rules.Bind(m.Store, rules.BindOptions{}); err != nil {
			h.m.Logger.Error("httplimit: rules not bound to the store; each request derives its limit", "err", err)
		} else {
			h.m.Rules = b
		}
	}
	return h
}

// scratch is one request's working memory, pooled: every descriptor's
// entries in one array, the descriptors, the resolved checks and the
// applied rules.
type scratch struct {
	entries []rules.Entry
	descs   []rules.Descriptor
	checks  []rules.Check
	as      []applied
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{entries: make([]rules.Entry, 0, 16), descs: make([]rules.Descriptor, 0, 4),
		checks: make([]rules.Check, 0, 4), as: make([]applied, 0, 4)}
}}

// release clears what the request used (so that the pool does not keep
// its strings alive) and returns sc to the pool.
func (sc *scratch) release() {
	if cap(sc.entries) > 64 || cap(sc.as) > 16 || cap(sc.checks) > 16 || cap(sc.descs) > 16 {
		return // an unusual request; let it go
	}
	// Only what this request used holds pointers to clear.
	clear(sc.entries)
	clear(sc.descs)
	clear(sc.checks)
	clear(sc.as)
	sc.entries, sc.descs, sc.checks, sc.as = sc.entries[:0], sc.descs[:0], sc.checks[:0], sc.as[:0]
	scratchPool.Put(sc)
}

type handler struct {
	m        Middleware
	next     http.Handler
	disabled map[string]bool
	policies policyCache // the RateLimit-Policy value (headers.go)
}

// applied is one limited check of one request and its decision.
type applied struct {
	rules.Check
	policy string
	d      ratelimit.Decision
	failed bool  // the store failed; the rule is skipped (not in headers)
	err    error // the store's error when the failure policy refused
}

// ServeHTTP: who is calling, what the request costs, which store requests
// the rules make of it (rules.Set.Resolve), charge them, answer.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := Identify(w, r, h.m.Identity, h.m.Logger)
	if !ok {
		return
	}
	cost, ok := h.cost(w, r, id)
	if !ok {
		return
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	as, err := h.resolve(sc, r, id, cost)
	if err != nil {
		h.m.Logger.Error("httplimit: resolve", "err", err)
		writeProblem(w, http.StatusInternalServerError, "cannot resolve the rate limits", "")
		return
	}
	if len(as) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	if dl, ok := ctx.Deadline(); ok {
		for i := range as {
			if as[i].Request.Algorithm == ratelimit.LeakyBucket {
				as[i].Request.MaxDelay = max(time.Until(dl), 1)
			}
		}
	}
	h.denialFirst(ctx, as, cost)
	denied, failed := h.charge(ctx, as)
	if failed {
		a := &as[denied]
		h.m.Refusals.Write(w, h.m.Headers, h.m.Refusals.unavailable(ctx, LayerRateLimit, ratelimit.FailError, a.Rule, a.policy, a.Request.Key, "rate limit", a.err))
		return
	}
	if denied >= 0 {
		as = as[:denied+1]
	}
	setHeaders(w.Header(), h.m.Headers, &h.policies, as, denied)
	if denied >= 0 {
		h.deny(ctx, w, &as[denied])
		return
	}
	var delay time.Duration
	for i := range as {
		delay = max(delay, as[i].d.Delay)
	}
	if delay > 0 && !wait(ctx, delay) {
		writeProblem(w, http.StatusServiceUnavailable, "request cancelled while queued", "")
		return
	}
	h.serveNext(w, r, as)
}

// cost is the request's cost: the cost header's when a trusted proxy sent
// one, else Cost.
func (h *handler) cost(w http.ResponseWriter, r *http.Request, id identity.Identity) (int64, bool) {
	m := &h.m
	if m.CostHeader == "" || !id.TrustedPeer {
		return m.Cost, true
	}
	vs := r.Header.Values(m.CostHeader)
	if len(vs) == 0 {
		return m.Cost, true
	}
	n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
	if len(vs) > 1 || err != nil || n <= 0 {
		writeProblem(w, http.StatusBadRequest, "the "+m.CostHeader+" header must be one positive integer", "")
		return 0, false
	}
	return n, true
}

// resolve builds the request's descriptors and returns the limited checks
// the rules make of them, in descriptor order.
func (h *handler) resolve(sc *scratch, r *http.Request, id identity.Identity, cost int64) ([]applied, error) {
	m := &h.m
	entries, descs := sc.entries[:0], sc.descs[:0]
	for _, d := range m.Descriptors {
		start := len(entries)
		var ok bool
		if entries, ok = d.AppendEntries(entries, r, id); !ok || len(entries) == start {
			entries = entries[:start]
			continue
		}
		descs = append(descs, rules.Descriptor{Entries: entries[start:len(entries):len(entries)], Hits: cost})
	}
	// When the entries array grew, earlier descriptors point into the old
	// one, which stays valid; the bigger one is kept for next time.
	sc.entries, sc.descs = entries, descs
	checks, err := m.Rules.Resolve(sc.checks[:0], rules.Input{Domain: m.Domain, Descriptors: descs, Now: m.Now, Shadow: m.Shadow, Disabled: h.disabled})
	sc.checks = checks
	as := sc.as[:0]
	for i := range checks {
		if checks[i].Kind == rules.Limited {
			if m.Adjust != nil {
				m.Adjust(r, &checks[i])
			}
			as = append(as, applied{Check: checks[i], policy: checks[i].Policy()})
		}
	}
	sc.as = as
	return as, err
}

// denialFirst: with several enforced rules, peek at each (a zero-cost
// request) and move the first that cannot admit the cost to the front, so
// that its denial charges none of the others. A denied Apply consumes
// nothing.
func (h *handler) denialFirst(ctx context.Context, as []applied, cost int64) {
	if countEnforced(as) < 2 {
		return
	}
	for i := range as {
		if !as[i].Enforced() {
			continue
		}
		p := as[i].Request
		p.N = 0
		d, err := as[i].Decide(ctx, h.m.Store, p)
		if err != nil {
			return // the charge observes it
		}
		if d.Remaining < cost {
			first := as[i]
			copy(as[1:i+1], as[:i])
			as[0] = first
			return
		}
	}
}

// charge applies each rule in order and stops at the first enforced
// denial, whose index it returns (-1: admitted). failed: that rule's
// store failed and the error policy answers for it.
func (h *handler) charge(ctx context.Context, as []applied) (denied int, failed bool) {
	m := &h.m
	for i := range as {
		a := &as[i]
		var (
			d   ratelimit.Decision
			err error
			lat time.Duration
		)
		if n := m.LatencySampling; m.Observe != nil && (n <= 1 || rand.Uint32N(uint32(min(n, 1<<31))) == 0) {
			t0 := time.Now()
			d, err = a.Decide(ctx, m.Store, a.Request)
			lat = max(time.Since(t0), 1) // measured: never 0
		} else {
			d, err = a.Decide(ctx, m.Store, a.Request)
		}
		if err != nil {
			h.observe(Event{Rule: a.Rule, Policy: a.policy, Outcome: StoreError, Key: a.Request.Key, Err: err, Latency: lat, Ctx: ctx})
			switch m.OnStoreError {
			case ratelimit.FailError:
				a.err = err
				return i, true
			case ratelimit.FailDeny:
				// The store said nothing: the rule is not full again in
				// less than the wait it is told to come back after.
				ra := m.Refusals.unavailableRetry()
				a.d = ratelimit.Decision{Limit: a.Request.Limit, RetryAfter: ra, ResetAfter: ra}
				a.err = err
				return i, false
			}
			a.d, a.failed = ratelimit.Decision{Allowed: true}, true
			continue
		}
		if !a.QuotaEnd.IsZero() {
			d = quotaReset(d, a.QuotaEnd, h.m.Now())
		}
		a.d = d
		ev := Event{Rule: a.Rule, Policy: a.policy, Outcome: Allowed, Key: a.Request.Key, Decision: d, Latency: lat, Ctx: ctx}
		switch {
		case d.Allowed:
		case !a.Enforced():
			// Shadow mode, or envoyproxy/ratelimit's quota_mode: reported,
			// never denied.
			ev.Outcome = ShadowDenied
		default:
			a.d = h.jitter(a.Request, d)
			ev.Outcome, ev.Decision = Denied, a.d
			h.observe(ev)
			return i, false
		}
		h.observe(ev)
	}
	return -1, false
}

// jitter adds ResetJitter's random wait to a fixed-window denial.
func (h *handler) jitter(req ratelimit.Request, d ratelimit.Decision) ratelimit.Decision {
	j := h.m.ResetJitter
	if j <= 0 || req.Algorithm != ratelimit.FixedWindow || d.Unsatisfiable || d.RetryAfter <= 0 {
		return d
	}
	d.RetryAfter += time.Duration(rand.Float64() * min(j, 1) * float64(req.Limit.Period))
	return d
}

// quotaReset: a quota resets at its calendar period's end, not its store
// window's.
func quotaReset(d ratelimit.Decision, end, now time.Time) ratelimit.Decision {
	left := end.Sub(now)
	d.ResetAfter = left
	if !d.Allowed && !d.Unsatisfiable {
		d.RetryAfter = left
	}
	return d
}

// deny refuses the request for a: 429 over its limit, 503 when its store
// failed under the deny policy.
func (h *handler) deny(ctx context.Context, w http.ResponseWriter, a *applied) {
	if a.err != nil {
		h.m.Refusals.Write(w, h.m.Headers, h.m.Refusals.unavailable(ctx, LayerRateLimit, ratelimit.FailDeny, a.Rule, a.policy, a.Request.Key, "rate limit", a.err))
		return
	}
	rf := Refusal{Layer: LayerRateLimit, Status: http.StatusTooManyRequests, Policy: a.policy, Rule: a.Rule, Key: a.Request.Key,
		RetryAfter: a.d.RetryAfter, Detail: "rate limit " + strconv.Quote(a.policy) + " exceeded", Denial: h.m.Denial, Ctx: ctx}
	switch {
	case a.d.Unsatisfiable:
		rf.Detail = "the request's cost exceeds the capacity of rate limit " + strconv.Quote(a.policy)
	case a.Rule != nil && a.Rule.Quota != nil:
		period := "monthly"
		if a.Rule.Quota.Period == rules.QuotaDay {
			period = "daily"
		}
		rf.Detail = period + " quota " + strconv.Quote(a.policy) + " exhausted"
	}
	h.m.Refusals.Write(w, h.m.Headers, rf)
}

func (h *handler) observe(e Event) {
	if h.m.Observe != nil {
		h.m.Observe(e)
	}
}

func countEnforced(as []applied) int {
	n := 0
	for i := range as {
		if as[i].Enforced() {
			n++
		}
	}
	return n
}

func wait(ctx context.Context, d time.Duration) bool { return tick.Sleep(ctx, d) == nil }

func remoteIP(addr string) netip.Addr {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(addr)
	return a.Unmap()
}
