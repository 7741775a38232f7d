package rules

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/ratelimit"
)

// This file binds a Set to a store: each rule's algorithm and limit are
// prepared once (ratelimit.Binder), at load and on every reload, instead
// of being validated and derived again on every store request.

// BindOptions configures Set.Bind. The zero value binds every rule to the
// store.
type BindOptions struct {
	// Prefetch is the store that rules with prefetch: true decide with: the
	// prefetch view of the Redis store (redisstore.Prefetch), which answers a
	// hot key from slices of its budget taken ahead. Nil: they decide
	// with the store, exactly, like every other rule; that is what the
	// memory store does, whose decisions are all local already (see
	// Set.PrefetchRules to warn about it).
	Prefetch ratelimit.Store
	// Variant, when set, names a second algorithm and limit that a door
	// charges for rule r besides the rule's own, to be prepared too (the
	// RLS counts envoyproxy/ratelimit's fixed windows with one event more
	// than the limit); ok false when there is none.
	Variant func(r *Rule) (a ratelimit.Algorithm, l ratelimit.Limit, ok bool)
}

// binding is what a bound Set prepared for one rule: the store that
// decides it, and up to two (algorithm, limit) pairs bound on that store.
type binding struct {
	store ratelimit.Store
	n     int // pairs bound
	alg   [2]ratelimit.Algorithm
	lim   [2]ratelimit.Limit
	bound [2]ratelimit.Bound
}

// Bind returns a Set with s's rules bound to store: each rate limit's
// algorithm and limit prepared once when the store is a ratelimit.Binder
// (memstore is one), and prefetch: true rules sent to opts.Prefetch when it is
// set. Checks that the returned Set resolves carry their binding, and
// Check.Decide uses it. s itself is not changed: bind again on every
// reload and swap the bound Set in, so that rules and bindings change
// together.
//
// A prefetch: true rule whose algorithm is not Prefetchable, and a rule
// the store cannot bind, are errors (an *Errors, each problem at
// the rule's file:line), and no Set is returned: a server keeps its last
// good one. A store that is not a Binder is not an error: the rule is
// decided by the store's Apply, as without Bind.
func (s *Set) Bind(store ratelimit.Store, opts BindOptions) (*Set, error) {
	if store == nil {
		return nil, fmt.Errorf("rules: bind: nil store")
	}
	out := &Set{configs: make(map[string]*Config, len(s.configs)), domains: s.domains, store: store}
	var errs Errors
	for _, dom := range s.domains {
		c := *s.configs[dom] // a shallow copy: the rules and the tree are shared, immutable
		c.binds = make([]binding, len(c.rules))
		for i, r := range c.rules {
			b := &c.binds[i]
			b.store = store
			if r.Prefetch {
				// The one rule of what may be prefetched, at every load
				// (the parser refuses such a rule too, at its field).
				if err := r.Algorithm.Prefetchable(); err != nil {
					errs = append(errs, Problem{File: r.File, Line: r.Line, Path: r.Key, Msg: strings.TrimPrefix(err.Error(), "ratelimit: ")})
					continue
				}
				if opts.Prefetch != nil {
					b.store = opts.Prefetch
				}
			}
			if r.Unlimited || r.Quota != nil || r.seq != i {
				continue // nothing to prepare: a quota's limit changes with its period
			}
			if err := b.add(r.Algorithm, r.Limit); err != nil {
				errs = append(errs, Problem{File: r.File, Line: r.Line, Path: r.Key, Msg: "store refused the rule: " + err.Error()})
				continue
			}
			if opts.Variant != nil {
				if a, l, ok := opts.Variant(r); ok {
					if err := b.add(a, l); err != nil {
						errs = append(errs, Problem{File: r.File, Line: r.Line, Path: r.Key, Msg: "store refused the rule: " + err.Error()})
					}
				}
			}
		}
		out.configs[dom] = &c
	}
	if len(errs) > 0 {
		errs.sort()
		return nil, &errs
	}
	return out, nil
}

// add binds a and l on b's store, when it is a Binder.
func (b *binding) add(a ratelimit.Algorithm, l ratelimit.Limit) error {
	bd, ok := b.store.(ratelimit.Binder)
	if !ok || b.n == len(b.bound) {
		return nil
	}
	bound, err := bd.Bind(a, l)
	if err != nil {
		return err
	}
	b.alg[b.n], b.lim[b.n], b.bound[b.n] = a, l, bound
	b.n++
	return nil
}

// Store returns the store s is bound to (Set.Bind), or nil.
func (s *Set) Store() ratelimit.Store { return s.store }

// PrefetchRules returns the rules of s with prefetch: true, in domain and
// file order: a server whose store has no prefetch view warns about them.
func (s *Set) PrefetchRules() []*Rule {
	var out []*Rule
	for _, dom := range s.domains {
		for _, r := range s.configs[dom].rules {
			if r.Prefetch {
				out = append(out, r)
			}
		}
	}
	return out
}

// Decide asks the store for req, which is c.Request or a door's variant
// of it (another cost, a peek, a refund, an adjusted limit). A check that
// a bound Set resolved (Set.Bind) is decided by its rule's binding: the
// prepared ratelimit.Bound when req has an algorithm and limit that were
// bound, else the Apply of the store its rule is bound to (the prefetched
// view, for a prefetch: true rule). Any other check (an override, a Set
// that is not bound) is decided by store.Apply. Either way the decision
// is the one store.Apply would make: a Bound decides exactly as Apply.
func (c *Check) Decide(ctx context.Context, store ratelimit.Store, req ratelimit.Request) (ratelimit.Decision, error) {
	b := c.b
	if b == nil {
		return store.Apply(ctx, req)
	}
	if !req.Refund {
		for i := 0; i < b.n; i++ {
			if b.lim[i] == req.Limit && b.alg[i] == req.Algorithm {
				return b.bound[i].Take(ctx, req.Key, req.N, req.MaxDelay)
			}
		}
	}
	return b.store.Apply(ctx, req)
}
