package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
)

// DefaultInFlightPolicy is the policy name of an InFlight middleware whose
// Policy is "".
const DefaultInFlightPolicy = "in-flight"

// DefaultInFlightRetryAfter is the Retry-After of a request denied for too
// many in flight when InFlight.RetryAfter is zero: a slot comes back when
// any of the caller's requests ends, which the server cannot foresee.
const DefaultInFlightRetryAfter = time.Second

// InFlightEvent reports one in-flight decision to InFlight.Observe.
type InFlightEvent struct {
	Policy   string
	Outcome  Outcome // Allowed, Denied or StoreError
	Key      string  // the in-flight key: KeyPrefix + the caller's identity key
	Decision inflight.Decision
	Err      error // the store error, for StoreError
}

// InFlight is middleware that caps the requests each caller has in flight
// at once: Stripe's concurrent requests limiter, GitHub's "no more than
// 100 concurrent requests". The caller is the identity the rate limits
// use (identity.Identity.Key: the user of an authenticated caller, else
// the client IP). A request over the cap is answered 429 Too Many
// Requests, as GitHub answers its secondary limits, with Retry-After
// (RetryAfter) and an application/problem+json body: it is the caller's
// own traffic that is over, not the server that is short.
//
// A request holds a lease (inflight.Store) while the next handler runs,
// and releases it when the handler returns, also when it panics. A
// request that outlives the lease's TTL renews it every TTL/2; a store
// that cannot renew lets the lease lapse (the request continues; its slot
// may go to another request of the caller). A process that dies holding
// leases gives them back after TTL.
//
// In the IETF header mode the cap is advertised as one more member of
// RateLimit-Policy, with the draft's quota unit for concurrency
// (`"in-flight";q=100;qu="concurrent-requests"`), and the slots left in
// RateLimit (`"in-flight";r=57`); the legacy and opaque modes add nothing.
type InFlight struct {
	// Store holds the leases. Required: a memory store for one process,
	// a Redis store (inflight/redisinflight) for a fleet.
	Store inflight.Store
	// Max is the most requests one caller has in flight. Required.
	Max int64
	// TTL is a lease's lifetime unless renewed; 0 means inflight.DefaultTTL.
	TTL time.Duration
	// Identity resolves the caller (as Middleware.Identity). Nil: by the
	// IP of RemoteAddr.
	Identity Identifier
	// KeyPrefix prefixes the identity key to make the in-flight key; ""
	// means "inflight:".
	KeyPrefix string
	// Policy names the limit in headers and problem bodies; "" means
	// DefaultInFlightPolicy.
	Policy string
	// Headers selects the response headers (see Middleware.Headers).
	Headers header.Mode
	// RetryAfter is the Retry-After of a 429; 0 means
	// DefaultInFlightRetryAfter.
	RetryAfter time.Duration
	// OnStoreError is what happens when the store cannot decide:
	// FailError (the zero value) answers 503, FailDeny 503 "limiter
	// unavailable" with Retry-After (Refusals.UnavailableRetryAfter),
	// FailAllow and FailLocal let the request through without a lease.
	OnStoreError ratelimit.FailurePolicy
	// Refusals writes the refusals and reports each to its observer (see
	// Middleware.Refusals).
	Refusals *Refusals
	// Denial, when set, is the status and body of a refusal over the
	// limit in place of 429 and problem+json (see Denial); nil keeps them.
	Denial *Denial
	// Observe, when set, is called for every decision (for metrics). It
	// must be fast and safe for concurrent use.
	Observe func(InFlightEvent)
	// Logger logs what is not about one request. Nil discards.
	Logger *slog.Logger
}

// Handler returns next wrapped by the in-flight cap. With no Store or a
// Max below 1 it returns next.
func (m *InFlight) Handler(next http.Handler) http.Handler {
	if m.Store == nil || m.Max < 1 {
		return next
	}
	h := &inFlightHandler{m: *m, next: next}
	if h.m.KeyPrefix == "" {
		h.m.KeyPrefix = "inflight:"
	}
	if h.m.Policy == "" {
		h.m.Policy = DefaultInFlightPolicy
	}
	if h.m.RetryAfter <= 0 {
		h.m.RetryAfter = DefaultInFlightRetryAfter
	}
	if h.m.Logger == nil {
		h.m.Logger = slog.New(slog.DiscardHandler)
	}
	h.policy = string(header.AppendString(nil, h.m.Policy)) + ";q=" + strconv.FormatInt(h.m.Max, 10) + `;qu="concurrent-requests"`
	return h
}

type inFlightHandler struct {
	m      InFlight
	next   http.Handler
	policy string // the RateLimit-Policy member
}

func (h *inFlightHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := &h.m
	id, ok := Identify(w, r, m.Identity, m.Logger)
	if !ok {
		return
	}
	key := m.KeyPrefix + id.Key()
	lease, d, err := m.Store.Acquire(r.Context(), inflight.Request{Key: key, Cap: m.Max, Weight: 1, TTL: m.TTL})
	ev := InFlightEvent{Policy: m.Policy, Outcome: Allowed, Key: key, Decision: d}
	if err != nil {
		ev.Outcome, ev.Err = StoreError, err
		m.observe(ev)
		switch m.OnStoreError {
		case ratelimit.FailError, ratelimit.FailDeny:
			m.Refusals.Write(w, m.Headers, m.Refusals.unavailable(r.Context(), LayerInFlight, m.OnStoreError, nil, m.Policy, key, "in-flight", err))
			return
		}
		h.next.ServeHTTP(w, r)
		return
	}
	if !d.Allowed {
		ev.Outcome = Denied
		m.observe(ev)
		h.deny(r.Context(), w, key, d)
		return
	}
	m.observe(ev)
	h.setHeaders(w.Header(), d)
	defer release(m.Store, lease)
	stop := renewWhileRunning(m.Store, lease, m.TTL)
	defer stop()
	h.next.ServeHTTP(w, r)
}

func (h *inFlightHandler) setHeaders(hd http.Header, d inflight.Decision) {
	if h.m.Headers != header.IETF {
		return
	}
	hd.Add("Ratelimit-Policy", h.policy)
	hd.Add("Ratelimit", string(header.AppendString(nil, h.m.Policy))+";r="+strconv.FormatInt(d.Remaining(), 10))
}

// deny answers 429 for a caller with too many requests in flight.
func (h *inFlightHandler) deny(ctx context.Context, w http.ResponseWriter, key string, d inflight.Decision) {
	m := &h.m
	h.setHeaders(w.Header(), d)
	rf := Refusal{Layer: LayerInFlight, Status: http.StatusTooManyRequests, Policy: m.Policy, Key: key, RetryAfter: m.RetryAfter,
		Detail: "too many requests in flight: at most " + strconv.FormatInt(m.Max, 10) + " at once", Denial: m.Denial, Ctx: ctx}
	if d.Unsatisfiable {
		rf.Detail, rf.RetryAfter = "the request weighs more than the in-flight limit "+strconv.Quote(m.Policy), 0
	}
	m.Refusals.Write(w, m.Headers, rf)
}

func (m *InFlight) observe(e InFlightEvent) {
	if m.Observe != nil {
		m.Observe(e)
	}
}

// leaseHolder is what holds a lease: an inflight.Store, a shed.Fleet.
type leaseHolder interface {
	Release(ctx context.Context, l inflight.Lease) error
	Renew(ctx context.Context, l inflight.Lease, ttl time.Duration) (inflight.Lease, error)
}

// release gives l back, whatever became of the request's context (a
// client that went away still frees its slot). The store bounds the call
// (a Redis store by its Timeout; memory does not wait).
func release(s leaseHolder, l inflight.Lease) {
	if l.Held() {
		s.Release(context.Background(), l)
	}
}

// renewal renews a lease every ttl/2 while its request runs.
type renewal struct {
	s   leaseHolder
	ttl time.Duration

	mu      sync.Mutex
	l       inflight.Lease
	t       *time.Timer
	stopped bool
}

// renewWhileRunning renews l every ttl/2 until stop is called, for
// requests that outlive their lease's TTL. A renewal that fails (the
// lease expired, the store is down) ends the renewals: the request goes
// on, and its slot may go to someone else after the TTL. It starts no
// goroutine until the first renewal is due.
func renewWhileRunning(s leaseHolder, l inflight.Lease, ttl time.Duration) (stop func()) {
	if !l.Held() {
		return func() {}
	}
	if ttl <= 0 {
		ttl = inflight.DefaultTTL
	}
	r := &renewal{s: s, ttl: ttl, l: l}
	r.mu.Lock() // r.t is set before the first renewal reads it
	r.t = time.AfterFunc(ttl/2, r.renew)
	r.mu.Unlock()
	return r.stop
}

func (r *renewal) renew() {
	r.mu.Lock()
	l, stopped := r.l, r.stopped
	r.mu.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.ttl/2)
	nl, err := r.s.Renew(ctx, l, r.ttl)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || r.stopped {
		return
	}
	r.l = nl
	r.t.Reset(r.ttl / 2)
}

func (r *renewal) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.t.Stop()
}
