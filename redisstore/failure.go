package redisstore

import (
	"context"
	"strconv"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
)

// The failure path: what Redis could not decide (a failed call, or the
// breaker of the request's node open) goes to Options.OnError.

// report gives node's breaker the outcome of a call to it (err nil: Redis
// answered), and OnFailure its error unless the breaker was open: a
// caller's failed trial (one per BreakerTrial) is counted, not logged,
// as the prober's failures are (one per backoff).
func (s *Store) report(node *redislink.Node, err error) {
	if err == nil {
		node.OK()
		return
	}
	open := node.Open()
	node.Fail(err, false)
	if !open && s.opts.OnFailure != nil {
		s.opts.OnFailure(err)
	}
}

// failure wraps an error from the client.
func (s *Store) failure(err error, n int) error {
	return redislink.Classify(err, s.opts.Timeout, ErrUnavailable, ErrScript, " (batch of "+strconv.Itoa(n)+")")
}

// failed applies the failure policy to req after err when fb is set, and
// returns err otherwise.
func (s *Store) failed(ctx context.Context, req ratelimit.Request, fb bool, err error) (ratelimit.Decision, error) {
	if !fb {
		return ratelimit.Decision{}, err
	}
	return s.fallback(ctx, req, err)
}

// fallback applies the failure policy to req after err.
func (s *Store) fallback(ctx context.Context, req ratelimit.Request, err error) (ratelimit.Decision, error) {
	s.policy.Add(1)
	lim := req.Limit.Normalize()
	if req.Refund && s.opts.OnError != ratelimit.FailLocal && s.opts.OnError != ratelimit.FailError {
		return ratelimit.Decision{Allowed: true, Limit: lim}, nil // nothing to give back to
	}
	if s.opts.OnError == ratelimit.FailAllow || s.opts.OnError == ratelimit.FailDeny {
		switch {
		case req.N > lim.Capacity(req.Algorithm):
			return ratelimit.Decision{Limit: lim, Unsatisfiable: true}, nil
		case req.N == 0:
			return ratelimit.Decision{Allowed: true, Limit: lim}, nil
		}
	}
	switch s.opts.OnError {
	case ratelimit.FailAllow:
		return ratelimit.Decision{Allowed: true, Limit: lim}, nil
	case ratelimit.FailDeny:
		// Not full again before the caller is told to come back: a reset
		// of 0 would say the quota is whole now (RateLimit t=0).
		return ratelimit.Decision{Limit: lim, RetryAfter: s.link.Cooldown(), ResetAfter: s.link.Cooldown()}, nil
	case ratelimit.FailLocal:
		return s.local.Apply(ctx, req)
	}
	return ratelimit.Decision{}, err
}
