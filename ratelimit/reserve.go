package ratelimit

import (
	"context"
	"sync/atomic"
	"time"
)

// Reservation is what ReserveN took for a key: the events it holds and
// when the caller may act on them. Act after Delay, or give the events back
// with Cancel.
type Reservation struct {
	ok       bool
	decision Decision
	l        *Limiter
	key      string
	n        int64
	done     atomic.Bool // cancelled
}

// OK reports whether the events were reserved. When it is false nothing
// was taken: the cost exceeds the burst (Decision().Unsatisfiable), or the
// wait would be longer than the store can hold, or, under the window
// algorithms, the window is full (Decision().RetryAfter says how long).
func (r *Reservation) OK() bool { return r.ok }

// Delay is how long, from the reservation, the caller must wait before
// acting: zero when the events are there now. It is zero when !OK.
func (r *Reservation) Delay() time.Duration { return r.decision.Delay }

// Decision is the store's decision, in the terms of the limiter's limit:
// Delay as above, Remaining and ResetAfter after the reservation.
func (r *Reservation) Decision() Decision { return r.decision }

// Cancel gives the reserved events back to the key through the store's
// refund path (Request.Refund under the limiter's current limit: never
// beyond full) and reports the store's error. It does so once; later calls,
// and Cancel of a reservation that is not OK or cost nothing, do nothing.
//
// Cancel only reservations that were not acted on. golang.org/x/time/rate's
// Cancel does nothing once the reserved time has passed, and gives back
// less when later reservations were made on the same limiter; sluice's
// store keeps no list of reservations and gives back all the events. The
// two agree when the reservation cancelled is the key's latest, before its
// time.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.ok || r.n == 0 || r.done.Swap(true) {
		return nil
	}
	l := r.l
	_, err := l.store.Apply(ctx, Request{Key: r.key, Limit: l.Limit(), Algorithm: l.algorithm, N: r.n, Refund: true})
	return err
}

// Reserve is ReserveN(ctx, key, 1).
func (l *Limiter) Reserve(ctx context.Context, key string) (*Reservation, error) {
	return l.ReserveN(ctx, key, 1)
}

// ReserveN takes n events for key now and says how long the caller must
// wait before acting on them, so that the caller can decide whether to wait
// (and Cancel if not) instead of being put to sleep. An error is the
// store's; it reserves nothing.
//
// Under GCRA and TokenBucket this is golang.org/x/time/rate's ReserveN: a
// cost up to Burst is always reserved, the key going into debt for events
// that are not there yet, and Delay is the time until they are; the
// following requests see the debt. The debt is bounded by MaxPeriod (the
// longest state a bucket holds): a reservation that would wait longer is
// not OK. Under LeakyBucket it is the request's slot in the queue (Delay as
// AllowN reports it; a full queue is not OK). Under the window algorithms
// it is AllowN: OK with no delay when the window has room.
func (l *Limiter) ReserveN(ctx context.Context, key string, n int64) (*Reservation, error) {
	b := l.cur.Load()
	r := &Reservation{l: l, key: key, n: n}
	if b.reserve == nil {
		d, err := l.bound.Take(ctx, key, n, 0)
		if err != nil {
			return nil, err
		}
		r.ok, r.decision = d.Allowed, d
		return r, nil
	}
	lim := b.limit
	if n > lim.Burst {
		r.decision = Decision{Limit: lim, Unsatisfiable: true}
		return r, nil
	}
	d, err := b.reserve.Take(ctx, key, n, 0)
	if err != nil {
		return nil, err
	}
	r.ok = d.Allowed
	r.decision = reserveDecision(d, lim)
	return r, nil
}

// reserveLimit returns the algorithm and limit that reserve under a
// bucket algorithm: the leaky queue, whose Delay is the backlog before the
// request, under the same interval (the keys' state is the same, with no
// conversion) and the longest burst MaxPeriod allows. It returns false for
// the algorithms that reserve as they decide.
func reserveLimit(a Algorithm, lim Limit) (Algorithm, Limit, bool) {
	if (a != GCRA && a != TokenBucket) || lim.Rate == 0 {
		return 0, Limit{}, false
	}
	iv := lim.Interval()
	lim.Burst = min(int64(MaxPeriod/iv), MaxRate)
	return LeakyBucket, lim, true
}

// reserveDecision turns a decision of the reserve queue (reserveLimit) on
// n events into one under lim: the caller's wait is the part of the
// backlog after the request beyond what lim's burst holds,
// ResetAfter − Burst·T (a peek, n = 0, waits for a debt to be paid, as
// x/time/rate's ReserveN(0) does).
func reserveDecision(d Decision, lim Limit) Decision {
	t := int64(lim.Interval())
	tau := lim.Burst * t
	d.Limit = lim
	if !d.Allowed {
		d.Remaining, d.Delay = 0, 0
		return d
	}
	ttl := int64(d.ResetAfter) // the backlog after the request
	d.Delay = time.Duration(max(0, ttl-tau))
	d.Remaining = 0
	if ttl < tau {
		d.Remaining = (tau - ttl) / t
	}
	return d
}
