package hostlimit

import "time"

// Bounds of the budgets a host keeps per resource.
const (
	// MaxResources is the most budgets a host keeps by name (GitHub's
	// X-RateLimit-Resource, an IETF policy's name), the unnamed one
	// included. A name beyond it evicts an idle budget (its model lapsed,
	// no request in flight), or else shares the unnamed budget.
	MaxResources = 16
	// MaxRoutes is the most routes per host whose budget is remembered;
	// a route beyond it is paced as one not seen yet.
	MaxRoutes = 64
)

// budget is one of a host's announced budgets: the server's model of it,
// and the requests it paces.
type budget struct {
	name string
	// gate is held by the one request of the budget waiting for the
	// host's bucket.
	gate chan struct{}
	ann  announced
	// margin is the wait after a window's guessed reset (see
	// alignMargin): each refusal after the guess doubles it.
	margin time.Duration
	sent   int      // requests paced by it holding a permit
	seq    uint64   // permits it paced
	live   []uint64 // the permits in flight, for Permit.Announce
	routes int      // the routes that map to it
}

func newBudget(name string) *budget {
	return &budget{name: name, gate: make(chan struct{}, 1)}
}

// routeBudget is the budget that paces a request on route at now: the one
// its answers last named, else the one most routes map to (a server that
// names a single budget counts every route against it; GitHub counts all
// but a few against core), else the unnamed one. A default learnt from
// fewer than minDefaultRoutes routes paces only while it has a request to
// spare: one route says nothing of the others (a client whose first
// request is a search must not hold its first core requests for the
// search reset). h.mu is held.
func (h *host) routeBudget(route string, now time.Time) *budget {
	if b := h.routes[route]; b != nil {
		return b
	}
	if d := h.dflt; d != nil && (d.routes >= minDefaultRoutes || !d.ann.active(now) || d.ann.tokens(now) >= 1) {
		return d
	}
	return h.unnamed
}

// budgetFor is the budget named name, added if there is room. h.mu is
// held.
func (h *host) budgetFor(name string, now time.Time) *budget {
	if b := h.budgets[name]; b != nil {
		return b
	}
	if len(h.budgets) >= MaxResources && !h.evictBudget(now) {
		return h.unnamed
	}
	b := newBudget(name)
	h.budgets[name] = b
	return b
}

// evictBudget forgets one idle named budget and the routes to it,
// reporting whether it found one. h.mu is held.
func (h *host) evictBudget(now time.Time) bool {
	for name, b := range h.budgets {
		if name == "" || b.sent > 0 || b.ann.active(now) || len(b.gate) > 0 {
			continue
		}
		delete(h.budgets, name)
		for r, rb := range h.routes {
			if rb == b {
				delete(h.routes, r)
			}
		}
		if h.dflt == b {
			h.dflt = nil
			h.electDefault()
		}
		return true
	}
	return false
}

// learnRoute remembers that route's requests count against b. h.mu is
// held.
func (h *host) learnRoute(route string, b *budget) {
	old, ok := h.routes[route]
	if old == b || !ok && len(h.routes) >= MaxRoutes {
		return
	}
	if ok {
		old.routes--
	}
	h.routes[route] = b
	b.routes++
	h.electDefault()
}

// electDefault makes the budget most routes map to the default of routes
// not seen yet. h.mu is held.
func (h *host) electDefault() {
	if h.dflt != nil && h.dflt.routes == 0 {
		h.dflt = nil
	}
	for _, b := range h.budgets {
		if b.routes > 0 && (h.dflt == nil || b.routes > h.dflt.routes) {
			h.dflt = b
		}
	}
}

// minDefaultRoutes is the fewest routes a default budget is learnt for
// before it holds the routes not seen yet when it is spent.
const minDefaultRoutes = 2

// pace is the sum of the paces of h's live budgets, and whether there is
// one. h.mu is held.
func (h *host) pace(now time.Time) (float64, bool) {
	var r float64
	var ok bool
	for _, b := range h.budgets {
		if b.ann.active(now) {
			r, ok = r+b.ann.pace(now), true
		}
	}
	return r, ok
}
