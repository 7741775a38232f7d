package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// Matcher finds the rule for a descriptor, or nil. *rules.Set implements
// it.
type Matcher interface {
	Match(domain string, entries []rules.Entry) *rules.Rule
}

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
	StoreError                  // the store failed; see Middleware.FailClosed
)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "store_error"}

// String returns allowed, denied, shadow_denied or store_error.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Event reports one rule's decision for one request to Middleware.Observe.
type Event struct {
	Rule    *rules.Rule
	Policy  string // the policy name shown in headers and problem bodies
	Outcome Outcome
	Err     error         // the store error, for StoreError
	Latency time.Duration // time spent in the store
}

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
	// Rules maps a descriptor to its rule.
	Rules Matcher
	// Domain is the rules domain the descriptors are matched in.
	Domain string
	// Descriptors build the request's descriptors; each is matched to at
	// most one rule.
	Descriptors []Descriptor
	// Identity resolves the caller. Nil means every caller is anonymous,
	// identified by the IP of RemoteAddr.
	Identity Identifier
	// Cost is what a request costs. 0 means 1.
	Cost int64
	// CostHeader, when set, names a request header carrying the cost (a
	// positive integer); when the header is absent Cost applies. A
	// malformed value is answered 400.
	CostHeader string
	// Headers selects the response headers. The zero value is IETF.
	Headers HeaderMode
	// Shadow puts every rule in shadow mode: would-be denials are observed
	// and logged, never enforced.
	Shadow bool
	// Disabled turns all limiting off: requests go straight to next.
	Disabled bool
	// DisabledRules names rules (by name, or by key when unnamed) that are
	// not applied.
	DisabledRules []string
	// FailClosed answers 503 when the store fails. The default is to fail
	// open: the failing rule is skipped.
	FailClosed bool
	// Observe, when set, is called for every rule decision (for metrics).
	// It must be fast and safe for concurrent use.
	Observe func(Event)
	// Logger logs shadow denials and store errors. Nil discards.
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
	h.m.Descriptors = append([]Descriptor(nil), m.Descriptors...)
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
	if h.m.Logger == nil {
		h.m.Logger = slog.New(slog.DiscardHandler)
	}
	return h
}

// scratch is one request's working memory, pooled: a descriptor's
// entries (which escape through the Matcher interface; they are only used
// until the rule's store key is built) and the applied rules.
type scratch struct {
	entries []rules.Entry
	as      []applied
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{entries: make([]rules.Entry, 0, 16), as: make([]applied, 0, 4)}
}}

// release clears what the request used (so that the pool does not keep
// its strings alive) and returns sc to the pool.
func (sc *scratch) release(nEntries, nApplied int) {
	if cap(sc.entries) > 64 || cap(sc.as) > 16 {
		return // an unusual request; let it go
	}
	clear(sc.entries[:min(nEntries, cap(sc.entries))])
	clear(sc.as[:min(nApplied, cap(sc.as))])
	scratchPool.Put(sc)
}

type handler struct {
	m        Middleware
	next     http.Handler
	disabled map[string]bool
}

// applied is one rule applied to one request.
type applied struct {
	rule   *rules.Rule
	policy string
	req    ratelimit.Request
	shadow bool
	d      ratelimit.Decision
	// quota period end, for quota rules
	end time.Time
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := &h.m
	var id identity.Identity
	if m.Identity != nil {
		var err error
		id, err = m.Identity.Resolve(r)
		if err != nil {
			if errors.Is(err, identity.ErrUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
				writeProblem(w, http.StatusUnauthorized, "invalid credentials", "")
				return
			}
			m.Logger.Error("httplimit: identify caller", "err", err)
			writeProblem(w, http.StatusInternalServerError, "cannot identify the caller", "")
			return
		}
	} else {
		id.IP = remoteIP(r.RemoteAddr)
	}
	cost := m.Cost
	if m.CostHeader != "" {
		if vs := r.Header.Values(m.CostHeader); len(vs) > 0 {
			n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
			if len(vs) > 1 || err != nil || n <= 0 {
				writeProblem(w, http.StatusBadRequest, "the "+m.CostHeader+" header must be one positive integer", "")
				return
			}
			cost = n
		}
	}

	// Match every descriptor, then drop replaced rules.
	sc := scratchPool.Get().(*scratch)
	nEntries := 0
	as := sc.as[:0]
	defer func() { sc.release(nEntries, len(as)) }()
	now := time.Time{}
	for _, d := range m.Descriptors {
		es, ok := sc.entries[:0], true
		for _, a := range d.Actions {
			e, produced := a.Entry(r, id)
			if !produced {
				ok = false
				break
			}
			if e.Key != "" {
				es = append(es, e)
			}
		}
		nEntries = max(nEntries, len(es))
		if cap(es) > cap(sc.entries) {
			sc.entries = es[:0] // keep the bigger array
		}
		if !ok || len(es) == 0 {
			continue
		}
		rule := m.Rules.Match(m.Domain, es)
		if rule == nil || rule.Unlimited {
			continue
		}
		name := rule.Name
		if h.disabled[name] {
			continue
		}
		a := applied{rule: rule, policy: name, shadow: m.Shadow || rule.ShadowMode}
		a.req = ratelimit.Request{Algorithm: rule.Algorithm, Limit: rule.Limit, N: cost}
		if rule.Quota != nil {
			if now.IsZero() {
				now = m.Now()
			}
			start, end := rule.Quota.Window(now)
			var err error
			a.req.Limit, err = QuotaLimit(start, end, rule.Quota.Limit)
			if err != nil {
				m.Logger.Error("httplimit: quota", "rule", name, "err", err)
				continue
			}
			a.req.Algorithm = ratelimit.FixedWindow
			a.end = end
			a.req.Key = storeKey(quotaPrefix(rule.Quota.Period, start), rule, es)
		} else {
			a.req.Key = storeKey(algPrefix[rule.Algorithm], rule, es)
		}
		as = append(as, a)
	}
	for i := 0; i < len(as); i++ {
		for _, rep := range as[i].rule.Replaces {
			for j := 0; j < len(as); j++ {
				if j != i && as[j].rule.Name == rep {
					as = append(as[:j], as[j+1:]...)
					if j < i {
						i--
					}
					j--
				}
			}
		}
	}
	if len(as) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}

	ctx := r.Context()
	if dl, ok := ctx.Deadline(); ok {
		for i := range as {
			if as[i].req.Algorithm == ratelimit.LeakyBucket {
				as[i].req.MaxDelay = max(time.Until(dl), 1)
			}
		}
	}

	// Several enforced rules: peek at each first (a zero-cost request) and
	// move the first that cannot admit the cost to the front, so that its
	// denial charges none of the others. A denied Apply consumes nothing.
	denied := -1
	failed := false
	if countEnforced(as) > 1 {
		for i := range as {
			if as[i].shadow || as[i].rule.QuotaMode {
				continue
			}
			p := as[i].req
			p.N = 0
			d, err := m.Store.Apply(ctx, p)
			if err != nil {
				break // the apply pass observes it
			}
			if d.Remaining < cost {
				first := as[i]
				copy(as[1:i+1], as[:i])
				as[0] = first
				break
			}
		}
	}
	{
		for i := range as {
			a := &as[i]
			t0 := time.Now()
			d, err := m.Store.Apply(ctx, a.req)
			lat := time.Since(t0)
			if err != nil {
				m.Logger.Warn("httplimit: store failed", "rule", a.policy, "fail_closed", m.FailClosed, "err", err)
				h.observe(Event{Rule: a.rule, Policy: a.policy, Outcome: StoreError, Err: err, Latency: lat})
				a.d = ratelimit.Decision{Allowed: true}
				if m.FailClosed {
					failed = true
					break
				}
				a.shadow = true // not reported in headers
				continue
			}
			a.d = d
			if d.Allowed {
				h.observe(Event{Rule: a.rule, Policy: a.policy, Outcome: Allowed, Latency: lat})
				continue
			}
			if a.shadow || a.rule.QuotaMode {
				// envoyproxy/ratelimit's quota_mode: reported, never denied.
				m.Logger.Info("httplimit: shadow denial", "rule", a.policy, "key", a.req.Key)
				h.observe(Event{Rule: a.rule, Policy: a.policy, Outcome: ShadowDenied, Latency: lat})
				continue
			}
			h.observe(Event{Rule: a.rule, Policy: a.policy, Outcome: Denied, Latency: lat})
			denied = i
			break
		}
	}
	if failed {
		writeProblem(w, http.StatusServiceUnavailable, "the rate limit store is unavailable", "")
		return
	}
	if denied >= 0 {
		as = as[:denied+1]
	}
	if now.IsZero() && (m.Headers == Legacy || hasQuota(as)) {
		now = m.Now()
	}
	for i := range as {
		if !as[i].end.IsZero() {
			// Quotas reset at the period's end, not the window's.
			left := as[i].end.Sub(now)
			as[i].d.ResetAfter = left
			if !as[i].d.Allowed && !as[i].d.Unsatisfiable {
				as[i].d.RetryAfter = left
			}
		}
	}
	setHeaders(w.Header(), m.Headers, as, denied, now)
	if denied >= 0 {
		a := &as[denied]
		if m.Headers == Opaque {
			writeProblem(w, http.StatusTooManyRequests, "", "")
			return
		}
		detail := "rate limit " + strconv.Quote(a.policy) + " exceeded"
		if a.d.Unsatisfiable {
			detail = "the request's cost exceeds the capacity of rate limit " + strconv.Quote(a.policy)
		} else if a.rule.Quota != nil {
			period := "monthly"
			if a.rule.Quota.Period == rules.QuotaDay {
				period = "daily"
			}
			detail = period + " quota " + strconv.Quote(a.policy) + " exhausted"
		}
		writeProblem(w, http.StatusTooManyRequests, detail, a.policy)
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
	h.next.ServeHTTP(w, r)
}

func (h *handler) observe(e Event) {
	if h.m.Observe != nil {
		h.m.Observe(e)
	}
}

func countEnforced(as []applied) int {
	n := 0
	for i := range as {
		if !as[i].shadow && !as[i].rule.QuotaMode {
			n++
		}
	}
	return n
}

func hasQuota(as []applied) bool {
	for i := range as {
		if !as[i].end.IsZero() {
			return true
		}
	}
	return false
}

func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func remoteIP(addr string) netip.Addr {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(addr)
	return a.Unmap()
}

// Store keys are "sl:<algorithm>:" followed by the rule's storage key (the
// envoyproxy/ratelimit cache key: domain and entries), or for quotas
// "sl:q:<period start>:" followed by it, so that each calendar period
// starts from zero and the state of one algorithm is never read as
// another's.
var algPrefix = func() map[ratelimit.Algorithm]string {
	m := map[ratelimit.Algorithm]string{}
	for _, a := range ratelimit.Algorithms() {
		m[a] = "sl:" + a.String() + ":"
	}
	return m
}()

func quotaPrefix(period string, start time.Time) string {
	if period == rules.QuotaMonth {
		return "sl:q:" + start.Format("2006-01") + ":"
	}
	return "sl:q:" + start.Format("2006-01-02") + ":"
}

func storeKey(prefix string, rule *rules.Rule, es []rules.Entry) string {
	var buf [128]byte
	b := append(buf[:0], prefix...)
	b = rule.AppendStorageKey(b, es)
	return string(b)
}
