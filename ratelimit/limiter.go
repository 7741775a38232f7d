package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	// bound decides: the store's own when the store is a Binder whose
	// Bound is a Rebinder, else a swapBound. It never changes (SetLimit
	// rebinds it in place), and one interface call keeps Allow small
	// enough to inline, which spares the hot path a copy of the decision.
	bound Bound
	// cur is the limit and the bound that reserves under it; SetLimit and
	// SetBurst replace it.
	cur atomic.Pointer[binding]
	mu  sync.Mutex // serializes SetLimit and SetBurst
}

// Rebinder is implemented by a Bound that can change its limit in place:
// after Rebind returns, Take decides under limit. Rebind returns the error
// Bind would for limit, and then changes nothing. A Limiter's SetLimit
// uses it when its store's Bound has it, so that Allow keeps a single
// interface call.
type Rebinder interface {
	Rebind(limit Limit) error
}

// binding is a limit and the bound that reserves under it (reserveBound;
// nil when the algorithm reserves as it decides).
type binding struct {
	limit   Limit
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

// swapBound is a Bound whose bound SetLimit replaces: for stores whose
// Bound is not a Rebinder.
type swapBound struct{ cur atomic.Pointer[Bound] }

func (b *swapBound) Take(ctx context.Context, key string, n int64, maxDelay time.Duration) (Decision, error) {
	return (*b.cur.Load()).Take(ctx, key, n, maxDelay)
}

// NewLimiter returns a Limiter applying limit with algorithm a on store. An
// invalid limit or algorithm is an error.
func NewLimiter(store Store, a Algorithm, limit Limit) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidRequest)
	}
	l := &Limiter{store: store, algorithm: a}
	b, bound, err := l.bind(limit)
	if err != nil {
		return nil, err
	}
	if _, ok := bound.(Rebinder); ok {
		l.bound = bound
	} else {
		sb := &swapBound{}
		sb.cur.Store(&bound)
		l.bound = sb
	}
	l.cur.Store(b)
	return l, nil
}

// bind validates limit and prepares its bounds on l's store: the binding
// and the bound that decides.
func (l *Limiter) bind(limit Limit) (*binding, Bound, error) {
	if err := (Request{Limit: limit, Algorithm: l.algorithm, N: 1}).Validate(); err != nil {
		return nil, nil, err
	}
	b := &binding{limit: limit.Normalize()}
	bound, err := l.bindOne(l.algorithm, b.limit)
	if err != nil {
		return nil, nil, err
	}
	if ra, rl, ok := reserveLimit(l.algorithm, b.limit); ok {
		if b.reserve, err = l.bindOne(ra, rl); err != nil {
			return nil, nil, err
		}
	}
	return b, bound, nil
}

func (l *Limiter) bindOne(a Algorithm, limit Limit) (Bound, error) {
	if s, ok := l.store.(Binder); ok {
		return s.Bind(a, limit)
	}
	return storeBound{store: l.store, algorithm: a, limit: limit}, nil
}

// set makes limit the limiter's; l.mu is held.
func (l *Limiter) set(limit Limit) error {
	b, bound, err := l.bind(limit)
	if err != nil {
		return err
	}
	if sb, ok := l.bound.(*swapBound); ok {
		sb.cur.Store(&bound)
	} else if err := l.bound.(Rebinder).Rebind(b.limit); err != nil {
		return err
	}
	l.cur.Store(b)
	return nil
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
	return l.set(limit)
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
	return l.set(limit)
}

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
