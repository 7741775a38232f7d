package redisstore

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
)

// Apply decides req in Redis. A denial is a Decision; an error means Redis
// could not decide and Options.OnError is ratelimit.FailError (or the request is
// invalid, or the store closed).
func (s *Store) Apply(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return s.apply(ctx, req, true)
}

// apply is Apply; without fb, a failure is returned as an error instead of
// going to Options.OnError (prefetch mode takes and returns slices with it).
// It sends req down one path, each in a file of its own: the denial cache
// (denycache.go), the failure policy while the breaker of req's node is
// open (failure.go), a caller's trial of that node (trial.go), plain
// commands for a lone fixed-window charge (fast.go), or a batch
// (batch.go).
func (s *Store) apply(ctx context.Context, req ratelimit.Request, fb bool) (ratelimit.Decision, error) {
	if d, done, err := s.early(ctx, &req); done {
		return d, err
	}
	var now time.Time
	if s.opts.Now != nil {
		now = s.opts.Now()
	}
	if d, ok := s.cached(req, now); ok {
		return d, nil
	}
	cn := s.conn.Load()
	if cn == nil { // the breaker is open until there is a client
		return s.failed(ctx, req, fb, s.link.Whole().Err())
	}
	lim := req.Limit.Normalize()
	c, g := s.prepare(cn, req, lim, now)
	trial, err := c.node.Allow()
	switch {
	case err != nil:
		c.node = nil
		s.calls.Put(c)
		if cn.cluster {
			s.readSlots() // a failover moves the node's slots to another
		}
		return s.failed(ctx, req, fb, err)
	case trial:
		if !s.trial(g, c) {
			return ratelimit.Decision{}, ratelimit.ErrClosed
		}
	case !s.opts.ScriptOnly && !c.unsat && fastEligible(req, lim) && s.batch.idle() && !s.noFast.Load():
		d, ok, err := s.fast(ctx, cn, c, s.opts.Now != nil)
		s.report(c.node, err)
		if err != nil {
			return s.failed(ctx, req, fb, err)
		}
		if ok {
			c.d = d
			return s.result(req, c, now), nil
		}
		fallthrough
	default:
		if !s.batch.submit(g, c) {
			return ratelimit.Decision{}, ratelimit.ErrClosed
		}
		if err := c.wait(ctx); err != nil {
			return ratelimit.Decision{}, err // the caller gave up; the call is its batch's still
		}
	}
	if c.err != nil {
		return s.failed(ctx, req, fb, c.err)
	}
	return s.result(req, c, now), nil
}

// early answers what needs no Redis: an invalid request, a closed store,
// a caller gone, a zero rate (nothing is ever admitted, and there is no
// state to consult). done false: req goes on (a refund of nothing made a
// peek).
func (s *Store) early(ctx context.Context, req *ratelimit.Request) (ratelimit.Decision, bool, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, true, err
	}
	if s.closed.Load() {
		return ratelimit.Decision{}, true, ratelimit.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Decision{}, true, err
	}
	if req.Refund && req.N == 0 {
		req.Refund = false // a peek
	}
	if lim := req.Limit.Normalize(); lim.Rate == 0 {
		return ratelimit.Decision{Limit: lim, Allowed: req.N == 0 || req.Refund, Unsatisfiable: req.N > 0 && !req.Refund}, true, nil
	}
	return ratelimit.Decision{}, false, nil
}

// prepare makes req's call, routed: its group, and its node's breaker in
// c.node.
func (s *Store) prepare(cn *conn, req ratelimit.Request, lim ratelimit.Limit, now time.Time) (*call, group) {
	c := s.calls.Get().(*call)
	c.unsat = req.N > lim.Capacity(req.Algorithm) && !req.Refund
	sent := req
	if c.unsat {
		sent.N = 0 // report the state, consume nothing
	}
	sh := shapeOf(req.Algorithm)
	s.callNames(c, sh, req.Key, s.readsLegacy(lim))
	c.n, c.lim = sent.N, lim
	c.spec, c.bucket = specOf(sh, sent)
	if req.Refund {
		// The scripts take a refund as a negative cost and answer it as a
		// peek; the log's cost goes per call.
		c.n = 0
		if sh == shapeLog {
			c.n = -min(req.N, ratelimit.MaxRate)
		}
	}
	c.sec, c.nsec = 0, 0
	c.err = nil
	c.state.Store(0)
	if s.opts.Now != nil {
		c.sec, c.nsec = now.Unix(), int64(now.Nanosecond())
	}
	if !cn.cluster {
		c.node = s.link.Whole()
		return c, group{shape: sh}
	}
	var g group
	g, c.node = s.route(sh, redislink.Slot(c.key))
	return c, g
}

// result takes c's decision and recycles c.
func (s *Store) result(req ratelimit.Request, c *call, now time.Time) ratelimit.Decision {
	d := c.d
	if c.unsat {
		d.Allowed, d.Unsatisfiable = false, true
	}
	c.key, c.mkey, c.raw, c.node = "", "", "", nil
	s.calls.Put(c)
	return s.decided(req, d, now)
}
