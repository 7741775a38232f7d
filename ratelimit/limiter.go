package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnsatisfiable is returned by Limiter.Wait when the request can never be
// admitted: its cost exceeds the limit's capacity, or the rate is zero.
var ErrUnsatisfiable = errors.New("ratelimit: cost exceeds the limit's capacity")

// ErrDeadline is returned by Limiter.Wait when the wait would not fit
// before the context's deadline. Wait returns it at once, without sleeping.
// errors.Is(err, context.DeadlineExceeded) also holds for it.
var ErrDeadline error = deadlineError{}

type deadlineError struct{}

func (deadlineError) Error() string { return "ratelimit: wait would exceed the context deadline" }
func (deadlineError) Is(target error) bool {
	return target == context.DeadlineExceeded
}

// Limiter binds a Store, an Algorithm and a Limit, so call sites only name
// the key. It is safe for concurrent use if its Store is.
//
// Most callers should use Allow in servers (decide now, answer 429 when
// denied) and Wait in clients (delay until admitted).
type Limiter struct {
	store     Store
	algorithm Algorithm
	limit     Limit
	// bound decides: the store's own when the store is a Binder, else
	// storeBound. One interface call keeps Allow small enough to inline,
	// which spares the hot path a copy of the decision.
	bound Bound
}

// storeBound is a Bound for a store that is not a Binder: each Take is an
// Apply.
type storeBound struct{ l *Limiter }

func (b storeBound) Take(ctx context.Context, key string, n int64, maxDelay time.Duration) (Decision, error) {
	l := b.l
	return l.store.Apply(ctx, Request{Key: key, Limit: l.limit, Algorithm: l.algorithm, N: n, MaxDelay: maxDelay})
}

// NewLimiter returns a Limiter applying limit with algorithm a on store. An
// invalid limit or algorithm is an error.
func NewLimiter(store Store, a Algorithm, limit Limit) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidRequest)
	}
	if err := (Request{Limit: limit, Algorithm: a, N: 1}).Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{store: store, algorithm: a, limit: limit.Normalize()}
	l.bound = storeBound{l}
	if b, ok := store.(Binder); ok {
		bound, err := b.Bind(a, l.limit)
		if err != nil {
			return nil, err
		}
		l.bound = bound
	}
	return l, nil
}

// Limit returns the limiter's limit, normalized.
func (l *Limiter) Limit() Limit { return l.limit }

// Algorithm returns the limiter's algorithm.
func (l *Limiter) Algorithm() Algorithm { return l.algorithm }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.bound.Take(ctx, key, 1, 0)
}

// AllowN decides now whether n events may happen for key, consuming them if
// so. With LeakyBucket an allowed decision may carry a Delay the caller must
// honour; Wait does that for you.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	return l.bound.Take(ctx, key, n, 0)
}

// Wait is WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) error {
	_, err := l.WaitN(ctx, key, 1)
	return err
}

// WaitN blocks until n events are admitted for key, then returns the
// decision that admitted them.
//
// It never sleeps past ctx's deadline: when the store says the wait would
// end after the deadline, WaitN returns ErrDeadline at once. A request that
// can never be admitted returns ErrUnsatisfiable at once. When ctx is
// cancelled while waiting, WaitN returns ctx's error.
//
// With LeakyBucket the request takes its slot in the queue (only if the slot
// fits before the deadline) and WaitN sleeps until it; requests leave in
// order at the steady rate. With the other algorithms WaitN sleeps for the
// decision's RetryAfter and asks again, so waiters are not served in FIFO
// order under contention.
func (l *Limiter) WaitN(ctx context.Context, key string, n int64) (Decision, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Decision{}, err
		}
		var maxDelay time.Duration
		deadline, hasDeadline := ctx.Deadline()
		if hasDeadline && l.algorithm == LeakyBucket {
			left := time.Until(deadline)
			if left <= 0 {
				return Decision{}, ErrDeadline
			}
			maxDelay = left
		}
		d, err := l.bound.Take(ctx, key, n, maxDelay)
		if err != nil {
			return d, err
		}
		if d.Unsatisfiable {
			return d, fmt.Errorf("%w: cost %d, capacity %d", ErrUnsatisfiable, n, l.limit.Capacity(l.algorithm))
		}
		wait := d.RetryAfter
		if d.Allowed {
			wait = d.Delay
		}
		if wait <= 0 {
			if d.Allowed {
				return d, nil
			}
			// A store that denies without saying how long to wait: do not
			// spin on it.
			wait = time.Millisecond
		}
		if hasDeadline && time.Until(deadline) < wait {
			// For an allowed LeakyBucket request this only happens when the
			// clock moved between MaxDelay and now; the slot is spent.
			return d, ErrDeadline
		}
		if err := sleep(ctx, wait); err != nil {
			return d, err
		}
		if d.Allowed {
			return d, nil
		}
	}
}

// sleep waits d or until ctx is done. It is tick.Sleep's twin: the
// vocabulary, at the ground floor, imports nothing of the module.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
