package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/shed"
)

// ShedPolicy is the policy a Shedder's refusals name.
const ShedPolicy = "shed"

// DefaultShedRetryAfter is the Retry-After of a shed request when
// Shedder.RetryAfter is zero: the utilization shedder moves its amount
// once a second.
const DefaultShedRetryAfter = time.Second

// Priority puts a request in a shedding class. The first rule that gives
// a class wins:
//
//  1. Header, a request header naming a class, believed only from a
//     trusted proxy (identity.Identity.TrustedPeer): a client cannot raise
//     its own priority. An unknown class name from the proxy is ignored.
//  2. Tiers, the class of the caller's tier (Stripe sheds test-mode
//     traffic first: a "test" tier of test-mode API keys).
//  3. Route, the class of the route, when HasRoute.
//  4. Methods, the class of the request's method (GET → get, POST → post).
//  5. Default.
type Priority struct {
	// Classes is the shedding order the names below are looked up in.
	Classes shed.Classes
	// Header names the request header a trusted proxy sets to a class
	// name. "": none.
	Header string
	// Tiers maps a caller's tier to a class.
	Tiers map[string]shed.Class
	// Route is the route's class, used when HasRoute.
	Route    shed.Class
	HasRoute bool
	// Methods maps a method (upper case) to a class; HEAD falls back to
	// GET's class.
	Methods map[string]shed.Class
	// Default is the class of everything else.
	Default shed.Class
}

// Class returns the class of r, whose caller is id.
func (p *Priority) Class(r *http.Request, id identity.Identity) shed.Class {
	if p.Header != "" && id.TrustedPeer {
		if vs := r.Header.Values(p.Header); len(vs) == 1 {
			if c, ok := p.Classes.Lookup(strings.TrimSpace(vs[0])); ok {
				return c
			}
		}
	}
	if id.Tier != "" {
		if c, ok := p.Tiers[id.Tier]; ok {
			return c
		}
	}
	if p.HasRoute {
		return p.Route
	}
	if c, ok := p.Methods[r.Method]; ok {
		return c
	}
	if r.Method == http.MethodHead {
		if c, ok := p.Methods[http.MethodGet]; ok {
			return c
		}
	}
	return p.Default
}

// ShedEvent reports one shedder decision to Shedder.Observe.
type ShedEvent struct {
	Shedder string // "utilization" or "fleet"
	Class   shed.Class
	Outcome Outcome // Allowed, Denied (shed) or StoreError (fleet store)
	Err     error
}

// Shedder is middleware that sheds load by priority: each request is put
// in a class (Priority), then offered to the utilization shedder (this
// process's workers, Stripe's layer 4) and the fleet shedder (one cap
// across the fleet with a reserve for critical classes, layer 3), in that
// order. A shed request is answered 503 Service Unavailable with
// Retry-After and an application/problem+json body naming the class: the
// server is short, whoever the caller. An admitted request is counted by
// both until the next handler returns, also when it panics.
type Shedder struct {
	// Utilization is the per-process shedder; nil: none.
	Utilization *shed.Utilization
	// Fleet is the fleet shedder; nil: none.
	Fleet *shed.Fleet
	// Priority classifies requests.
	Priority Priority
	// Identity resolves the caller (for the trusted header and the tier).
	// Nil: by the IP of RemoteAddr, never trusted.
	Identity Identifier
	// RetryAfter is the Retry-After of a 503; 0 means
	// DefaultShedRetryAfter.
	RetryAfter time.Duration
	// OnStoreError is what happens when the fleet's store cannot decide:
	// FailError (the zero value) answers 503, FailDeny 503 "limiter
	// unavailable" with Retry-After (Refusals.UnavailableRetryAfter),
	// FailAllow and FailLocal admit without a lease.
	OnStoreError ratelimit.FailurePolicy
	// Refusals writes the refusals and reports each to its observer (see
	// Middleware.Refusals).
	Refusals *Refusals
	// Observe, when set, is called for every decision. It must be fast
	// and safe for concurrent use.
	Observe func(ShedEvent)
	// Logger logs what is not about one request. Nil discards.
	Logger *slog.Logger
}

// Handler returns next behind the shedders. With neither shedder it
// returns next.
func (m *Shedder) Handler(next http.Handler) http.Handler {
	if m.Utilization == nil && m.Fleet == nil {
		return next
	}
	h := &shedHandler{m: *m, next: next,
		busy: newOverload(LayerShed, ShedPolicy, m.RetryAfter, DefaultShedRetryAfter, m.Refusals)}
	if h.m.Logger == nil {
		h.m.Logger = slog.New(slog.DiscardHandler)
	}
	return h
}

type shedHandler struct {
	m    Shedder
	busy overload
	next http.Handler
}

func (h *shedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := &h.m
	id, ok := Identify(w, r, m.Identity, m.Logger)
	if !ok {
		return
	}
	c := m.Priority.Class(r, id)
	if u := m.Utilization; u != nil {
		if !u.Acquire(c) {
			m.observe(ShedEvent{Shedder: "utilization", Class: c, Outcome: Denied})
			h.shed(r.Context(), w, "utilization", c, "this server is overloaded")
			return
		}
		defer u.Release()
		m.observe(ShedEvent{Shedder: "utilization", Class: c, Outcome: Allowed})
	}
	if f := m.Fleet; f != nil {
		ticket, d, err := f.Enter(r.Context(), c)
		switch {
		case err != nil:
			m.observe(ShedEvent{Shedder: "fleet", Class: c, Outcome: StoreError, Err: err})
			switch m.OnStoreError {
			case ratelimit.FailError, ratelimit.FailDeny:
				m.Refusals.Write(w, header.IETF, m.Refusals.unavailable(r.Context(), LayerShed, m.OnStoreError, nil, ShedPolicy, "fleet:"+m.Priority.Classes.Name(c), "fleet", err))
				return
			}
		case !d.Allowed:
			m.observe(ShedEvent{Shedder: "fleet", Class: c, Outcome: Denied})
			h.shed(r.Context(), w, "fleet", c, "the fleet is at capacity")
			return
		default:
			m.observe(ShedEvent{Shedder: "fleet", Class: c, Outcome: Allowed})
			defer f.Leave(ticket) // renewed meanwhile by the Fleet's one renewer
		}
	}
	h.next.ServeHTTP(w, r)
}

// shed answers 503 for a request of class c that shedder shed.
func (h *shedHandler) shed(ctx context.Context, w http.ResponseWriter, shedder string, c shed.Class, why string) {
	name := h.m.Priority.Classes.Name(c)
	h.busy.refuse(ctx, w, shedder+":"+name, why+": "+strconv.Quote(name)+" requests are being shed")
}

func (m *Shedder) observe(e ShedEvent) {
	if m.Observe != nil {
		m.Observe(e)
	}
}
