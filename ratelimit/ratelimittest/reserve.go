package ratelimittest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// ReserveOp is what a ReserveStep does on a Limiter.
type ReserveOp uint8

const (
	OpReserve  ReserveOp = iota // ReserveN(N); want OK, Delay, Remaining
	OpCancel                    // Cancel the reservation of step Of
	OpAllow                     // AllowN(N); want OK (allowed), Remaining, RetryAfter
	OpSetLimit                  // SetLimit(Limit)
	OpSetBurst                  // SetBurst(N)
)

// ReserveStep is one call of a ReserveTable at T0+At.
type ReserveStep struct {
	At         time.Duration
	Op         ReserveOp
	N          int64
	Limit      ratelimit.Limit // OpSetLimit
	Of         int             // OpCancel: the step whose reservation is cancelled
	OK         bool
	Delay      time.Duration
	Remaining  int64
	RetryAfter time.Duration // checked when not zero
}

// ReserveTable is a sequence of Limiter calls on one key: reservations,
// their cancellation and limit changes in place.
type ReserveTable struct {
	Name       string
	Algorithms []ratelimit.Algorithm
	Limit      ratelimit.Limit
	Steps      []ReserveStep
}

// ReserveTables returns the reservation tables.
func ReserveTables() []ReserveTable {
	sec2 := ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 2}
	return []ReserveTable{{
		// x/time/rate's Reserve: up to Burst always reserved, into debt.
		Name: "bucket", Algorithms: []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket}, Limit: sec2,
		Steps: []ReserveStep{
			{Op: OpReserve, N: 1, OK: true, Remaining: 1},
			{Op: OpReserve, N: 1, OK: true},
			{Op: OpReserve, N: 1, OK: true, Delay: time.Second},
			{Op: OpReserve, N: 2, OK: true, Delay: 3 * time.Second},
			{Op: OpReserve, N: 3}, // beyond the burst: never
			// TAT is 5 s: one more fits when it is back within 2 s of now.
			{Op: OpAllow, N: 1, RetryAfter: 4 * time.Second},
			{Op: OpCancel, Of: 3},
			{Op: OpAllow, N: 1, RetryAfter: 2 * time.Second},
			{At: 2 * time.Second, Op: OpAllow, N: 1, OK: true},
			// 2 events used (TAT 4 s) are 2 at 500 ms: a backlog of 1 s.
			{At: 2 * time.Second, Op: OpSetLimit, Limit: ratelimit.Limit{Rate: 2, Period: time.Second, Burst: 2}},
			{At: 2 * time.Second, Op: OpReserve, N: 0, OK: true},
			{At: 2 * time.Second, Op: OpReserve, N: 1, OK: true, Delay: 500 * time.Millisecond},
			// The burst grows, the 3 used stay used: 1 of 4 is left.
			{At: 2 * time.Second, Op: OpSetBurst, N: 4},
			{At: 2 * time.Second, Op: OpReserve, N: 0, OK: true, Remaining: 1},
			{At: 2 * time.Second, Op: OpReserve, N: 2, OK: true, Delay: 500 * time.Millisecond},
			{At: 2 * time.Second, Op: OpCancel, Of: 14},
			{At: 2 * time.Second, Op: OpCancel, Of: 14}, // once only
			{At: 2 * time.Second, Op: OpAllow, N: 1, OK: true},
			{At: 2 * time.Second, Op: OpAllow, N: 1, RetryAfter: 500 * time.Millisecond},
		},
	}, {
		// The queue: Delay is the slot, a full queue reserves nothing.
		Name: "queue", Algorithms: []ratelimit.Algorithm{ratelimit.LeakyBucket}, Limit: sec2,
		Steps: []ReserveStep{
			{Op: OpReserve, N: 1, OK: true, Remaining: 1},
			{Op: OpReserve, N: 1, OK: true, Delay: time.Second},
			{Op: OpReserve, N: 1, RetryAfter: time.Second},
			{Op: OpCancel, Of: 1},
			{Op: OpReserve, N: 1, OK: true, Delay: time.Second},
		},
	}, {
		// The windows reserve what fits in the window now, no more.
		Name: "window", Algorithms: windows, Limit: ratelimit.PerMinute(2),
		Steps: []ReserveStep{
			{Op: OpReserve, N: 2, OK: true},
			{Op: OpReserve, N: 1}, // full until the window (the log: its events) moves on
			{Op: OpCancel, Of: 0},
			{Op: OpReserve, N: 1, OK: true, Remaining: 1},
			{Op: OpSetLimit, Limit: ratelimit.PerMinute(4)},
			{Op: OpAllow, N: 1, OK: true, Remaining: 2},
		},
	}}
}

// testReserve runs ReserveTables through a Limiter on the store.
func testReserve(t *testing.T, newStore NewStore) {
	for _, tb := range ReserveTables() {
		for _, alg := range tb.Algorithms {
			t.Run(tb.Name+"/"+alg.String(), func(t *testing.T) {
				clock := NewClock(T0)
				l, err := ratelimit.NewLimiter(newStore(t, clock.Now), alg, tb.Limit)
				if err != nil {
					t.Fatal(err)
				}
				k := key(t, "k")
				res := make([]*ratelimit.Reservation, len(tb.Steps))
				for i, s := range tb.Steps {
					clock.Set(T0.Add(s.At))
					res[i] = reserveStep(t, l, k, s, res)
				}
			})
		}
	}
}

// reserveStep does s on l and checks what it returns; a reservation is
// returned for later steps to cancel.
func reserveStep(t *testing.T, l *ratelimit.Limiter, k string, s ReserveStep, res []*ratelimit.Reservation) *ratelimit.Reservation {
	t.Helper()
	ctx := context.Background()
	var err error
	var r *ratelimit.Reservation
	var d ratelimit.Decision
	switch s.Op {
	case OpSetLimit:
		err = l.SetLimit(s.Limit)
	case OpSetBurst:
		err = l.SetBurst(s.N)
	case OpCancel:
		err = res[s.Of].Cancel(ctx)
	case OpAllow:
		d, err = l.AllowN(ctx, k, s.N)
		if err == nil && (d.Allowed != s.OK || d.Remaining != s.Remaining || (s.RetryAfter != 0 && d.RetryAfter != s.RetryAfter)) {
			t.Errorf("at %v AllowN(%d): %+v, want allowed %v, remaining %d, retry after %v", s.At, s.N, d, s.OK, s.Remaining, s.RetryAfter)
		}
	case OpReserve:
		r, err = l.ReserveN(ctx, k, s.N)
		if err == nil {
			d = r.Decision()
			if r.OK() != s.OK || r.Delay() != s.Delay || d.Remaining != s.Remaining || (s.RetryAfter != 0 && d.RetryAfter != s.RetryAfter) {
				t.Errorf("at %v ReserveN(%d): OK %v, %+v; want OK %v, delay %v, remaining %d, retry after %v",
					s.At, s.N, r.OK(), d, s.OK, s.Delay, s.Remaining, s.RetryAfter)
			}
		}
	}
	if err != nil {
		t.Fatalf("at %v, op %d: %v", s.At, s.Op, err)
	}
	return r
}
