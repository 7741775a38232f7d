package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
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
	// cur is the limit and what decides under it; SetLimit and SetBurst
	// swap it whole, so a decision never mixes two limits.
	cur atomic.Pointer[binding]
	mu  sync.Mutex // serializes SetLimit and SetBurst
}

// binding is a limit and its bounds. bound decides: the store's own when
// the store is a Binder, else a storeBound. reserve decides reservations
// (reserveBound).
type binding struct {
	limit   Limit
	bound   Bound
	reserve Bound
}

// storeBound is a Bound for a store that is not a Binder: each Take is an
// Apply.
type storeBound struct {
	store     Store
	algorithm Algorithm
	limit     Limit
}

func (b storeBound) Take(ctx context.Context, key string, n int64, maxDelay time.Duration) (Decision, error) {
	return b.store.Apply(ctx, Request{Key: key, Limit: b.limit, Algorithm: b.algorithm, N: n, MaxDelay: maxDelay})
}

// NewLimiter returns a Limiter applying limit with algorithm a on store. An
// invalid limit or algorithm is an error.
func NewLimiter(store Store, a Algorithm, limit Limit) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidRequest)
	}
	l := &Limiter{store: store, algorithm: a}
	b, err := l.bind(limit)
	if err != nil {
		return nil, err
	}
	l.cur.Store(b)
	return l, nil
}

// bind validates limit and prepares its bounds on l's store.
func (l *Limiter) bind(limit Limit) (*binding, error) {
	if err := (Request{Limit: limit, Algorithm: l.algorithm, N: 1}).Validate(); err != nil {
		return nil, err
	}
	b := &binding{limit: limit.Normalize()}
	var err error
	if b.bound, err = l.bindOne(l.algorithm, b.limit); err != nil {
		return nil, err
	}
	if ra, rl, ok := reserveLimit(l.algorithm, b.limit); ok {
		if b.reserve, err = l.bindOne(ra, rl); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (l *Limiter) bindOne(a Algorithm, limit Limit) (Bound, error) {
	if s, ok := l.store.(Binder); ok {
		return s.Bind(a, limit)
	}
	return storeBound{store: l.store, algorithm: a, limit: limit}, nil
}

// Limit returns the limiter's limit, normalized.
func (l *Limiter) Limit() Limit { return l.cur.Load().limit }

// Algorithm returns the limiter's algorithm.
func (l *Limiter) Algorithm() Algorithm { return l.algorithm }

// SetLimit replaces the limiter's limit in place: decisions taken after it
// returns apply limit. What each key has used stays used (the store's
// limit-change rule): under GCRA and TokenBucket, a key that had used u
// events under the old limit has used u under the new one, its backlog
// converted to the new interval, the fraction of an event rounded up. An
// invalid limit is an error and changes nothing. It is safe to call
// concurrently with every other method.
//
// golang.org/x/time/rate's SetLimit keeps the bucket's tokens, not the
// events used: for the same Burst the two are the same (tokens = Burst −
// used). They differ when the Burst changes too, as SetBurst says. And
// x/time's limiter is one bucket, converted at the change; a Limiter has
// many keys, and the store converts each when a request under the new
// limit next meets it: until then the key drains at the old rate. To have
// a key converted at the change, peek it then (AllowN(ctx, key, 0)).
func (l *Limiter) SetLimit(limit Limit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := l.bind(limit)
	if err != nil {
		return err
	}
	l.cur.Store(b)
	return nil
}

// SetBurst is SetLimit with the limit's Burst set to burst (0 means Rate)
// and its Rate and Period kept. The interval is the same, so each key keeps
// its state as it is: the events it used count against the new burst.
//
// Here golang.org/x/time/rate differs: its SetBurst keeps the tokens left,
// capped at the new burst. Raising the burst from 10 to 20 with 8 used
// leaves sluice's key 12 events and x/time's 2 (until it refills); lowering
// it to 5 leaves sluice's key 3 events in debt (admitting again after 4
// intervals) and x/time's with 2 tokens: x/time forgives what was used
// beyond the new burst, sluice does not, so that a change and its reverse
// never mint capacity.
func (l *Limiter) SetBurst(burst int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := l.cur.Load().limit
	limit.Burst = burst
	b, err := l.bind(limit)
	if err != nil {
		return err
	}
	l.cur.Store(b)
	return nil
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.cur.Load().bound.Take(ctx, key, 1, 0)
}

// AllowN decides now whether n events may happen for key, consuming them if
// so. With LeakyBucket an allowed decision may carry a Delay the caller must
// honour; Wait does that for you.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	return l.cur.Load().bound.Take(ctx, key, n, 0)
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
		d, err := l.cur.Load().bound.Take(ctx, key, n, maxDelay)
		if err != nil {
			return d, err
		}
		if d.Unsatisfiable {
			return d, fmt.Errorf("%w: cost %d, capacity %d", ErrUnsatisfiable, n, d.Limit.Capacity(l.algorithm))
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
		if err := tick.Sleep(ctx, wait); err != nil {
			return d, err
		}
		if d.Allowed {
			return d, nil
		}
	}
}
