package reference

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"golang.org/x/time/rate"
)

// reserveTolerance is how far a sluice Delay may be from x/time/rate's:
// x/time counts tokens in float64 and truncates the wait to the
// nanosecond (Limit.durationFromTokens), sluice counts whole nanoseconds,
// so x/time's wait can come out 1 ns short (a tolerance of 0 fails on
// these sequences).
const reserveTolerance = time.Nanosecond

// reserveTally counts what the sequences did, so that the test proves it
// compared delays, cancellations and limit changes.
type reserveTally struct{ delayed, cancels, changes int }

// TestReserveAgainstXTime runs random sequences of ReserveN, Cancel and
// SetLimit on a virtual clock against x/time/rate's ReserveN, CancelAt
// and SetLimitAt, and demands the same OK and the same Delay (to
// reserveTolerance), and the same whole tokens left on a peek.
//
// The sequences stay where the two are meant to agree: the burst never
// changes (TestSetBurstAgainstXTime has the difference), a Cancel is of
// the latest reservation before its time (x/time gives back less
// otherwise), and the key is peeked at each SetLimit (sluice converts a
// key when it next sees it: TestSetLimitUnseenKey).
func TestReserveAgainstXTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	rates := []int64{1, 2, 4, 5, 8, 10, 20, 25, 50, 100, 1000}
	var tl reserveTally
	for seq := range 40 {
		burst := 1 + rng.Int64N(20)
		lim := ratelimit.Limit{Rate: rates[rng.IntN(len(rates))], Period: time.Second, Burst: burst}
		clock := ratelimittest.NewClock(ratelimittest.T0)
		s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
		l, err := ratelimit.NewLimiter(s, ratelimit.TokenBucket, lim)
		if err != nil {
			t.Fatal(err)
		}
		x := rate.NewLimiter(rate.Limit(lim.Rate), int(burst))
		replayReserve(t, rng, seq, l, x, clock, rates, &tl)
		s.Close()
	}
	t.Logf("%d delayed reservations, %d cancellations, %d limit changes: same decisions as x/time/rate", tl.delayed, tl.cancels, tl.changes)
	if tl.delayed < 100 || tl.cancels < 100 || tl.changes < 100 {
		t.Errorf("the sequences compared too little: %+v", tl)
	}
}

// latest is the last OK reservation of a sequence, on both sides.
type latest struct {
	s      *ratelimit.Reservation
	x      *rate.Reservation
	n      int64
	at     time.Time // x/time's time to act
	cancel bool
}

func replayReserve(t *testing.T, rng *rand.Rand, seq int, l *ratelimit.Limiter, x *rate.Limiter, clock *ratelimittest.Clock, rates []int64, tl *reserveTally) {
	t.Helper()
	ctx := context.Background()
	at := ratelimittest.T0
	var last latest
	for i := range 300 {
		lim := l.Limit()
		iv := lim.Interval()
		switch r := rng.IntN(10); {
		case r < 3:
		case r < 8:
			at = at.Add(time.Duration(rng.Int64N(int64(2*iv)/1000+1)) * time.Microsecond)
		default:
			at = at.Add(time.Duration(rng.Int64N(int64(lim.Burst)*int64(iv)/1000+1)) * time.Microsecond)
		}
		clock.Set(at)
		switch op := rng.IntN(10); {
		case op < 7:
			n := rng.Int64N(lim.Burst + 2)
			sr, err := l.ReserveN(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			xr := x.ReserveN(at, int(n))
			if sr.OK() != xr.OK() {
				t.Fatalf("seq %d step %d at %v under %v: ReserveN(%d) OK sluice %v, x/time %v", seq, i, at.Sub(ratelimittest.T0), lim, n, sr.OK(), xr.OK())
			}
			if !xr.OK() {
				continue
			}
			sd, xd := sr.Delay(), xr.DelayFrom(at)
			if d := sd - xd; d < -reserveTolerance || d > reserveTolerance {
				t.Fatalf("seq %d step %d at %v under %v: ReserveN(%d) delay sluice %v, x/time %v", seq, i, at.Sub(ratelimittest.T0), lim, n, sd, xd)
			}
			if xd > 0 {
				tl.delayed++
			}
			last = latest{s: sr, x: xr, n: n, at: at.Add(xd)}
		case op < 8:
			if last.s == nil || last.cancel || last.n == 0 || last.at.Before(at) {
				continue
			}
			if err := last.s.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			last.x.CancelAt(at)
			last.cancel = true
			tl.cancels++
		default:
			to := ratelimit.Limit{Rate: rates[rng.IntN(len(rates))], Period: time.Second, Burst: lim.Burst}
			if err := l.SetLimit(to); err != nil {
				t.Fatal(err)
			}
			x.SetLimitAt(at, rate.Limit(to.Rate))
			tl.changes++
			if _, err := l.AllowN(ctx, "k", 0); err != nil { // the key meets the change now
				t.Fatal(err)
			}
		}
		comparePeek(t, l, x, at, seq, i)
	}
}

// comparePeek checks that sluice's Remaining is x/time's tokens, floored
// and never negative (up to x/time's float error at a whole token).
func comparePeek(t *testing.T, l *ratelimit.Limiter, x *rate.Limiter, at time.Time, seq, i int) {
	t.Helper()
	d, err := l.AllowN(context.Background(), "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	tok := x.TokensAt(at)
	lo, hi := math.Floor(tok-1e-6), math.Floor(tok+1e-6)
	if got := float64(d.Remaining); got != max(lo, 0) && got != max(hi, 0) {
		t.Fatalf("seq %d step %d at %v: sluice remaining %d, x/time tokens %v", seq, i, at.Sub(ratelimittest.T0), d.Remaining, tok)
	}
}

// newPair returns a sluice TokenBucket limiter on a memstore with a
// virtual clock and x/time/rate's limiter of the same limit, both with 8
// of lim's events used at T0.
func newPair(t *testing.T, lim ratelimit.Limit) (*ratelimit.Limiter, *rate.Limiter, *ratelimittest.Clock) {
	t.Helper()
	clock := ratelimittest.NewClock(ratelimittest.T0)
	s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	l, err := ratelimit.NewLimiter(s, ratelimit.TokenBucket, lim)
	if err != nil {
		t.Fatal(err)
	}
	x := xLimiter(lim)
	if d, err := l.AllowN(context.Background(), "k", 8); err != nil || !d.Allowed || !x.AllowN(ratelimittest.T0, 8) {
		t.Fatalf("8 of %v: sluice %+v %v; want both admitted", lim, d, err)
	}
	return l, x, clock
}

func peek(t *testing.T, l *ratelimit.Limiter) ratelimit.Decision {
	t.Helper()
	d, err := l.AllowN(context.Background(), "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSetBurstAgainstXTime pins where SetBurst differs: x/time/rate keeps
// the tokens left (capped at the new burst), sluice keeps the events used.
// 8 used of 10 at 1/s: raised to 20, x/time has 2 tokens and sluice 12
// events; lowered to 5, x/time still has 2 tokens and sluice is 3 events
// in debt, admitting again 4 s later.
func TestSetBurstAgainstXTime(t *testing.T) {
	lim := ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 10}
	t.Run("raise", func(t *testing.T) {
		l, x, _ := newPair(t, lim)
		if err := l.SetBurst(20); err != nil {
			t.Fatal(err)
		}
		x.SetBurstAt(ratelimittest.T0, 20)
		if d, tok := peek(t, l), x.TokensAt(ratelimittest.T0); d.Remaining != 12 || tok != 2 {
			t.Errorf("raised to 20: sluice remaining %d, x/time tokens %v; want 12 and 2", d.Remaining, tok)
		}
	})
	t.Run("lower", func(t *testing.T) {
		l, x, _ := newPair(t, lim)
		if err := l.SetBurst(5); err != nil {
			t.Fatal(err)
		}
		x.SetBurstAt(ratelimittest.T0, 5)
		d, err := l.AllowN(context.Background(), "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.RetryAfter != 4*time.Second || !x.AllowN(ratelimittest.T0, 2) {
			t.Errorf("lowered to 5: sluice %+v, want denied for 4 s; x/time must admit its 2 tokens", d)
		}
	})
}

// TestSetLimitUnseenKey pins the other difference: x/time/rate's limiter
// is one bucket and SetLimitAt converts it at the change; a sluice limiter
// has many keys and its store converts each when a request next meets it,
// so until then the key drains at the old rate. 8 used of 10 at 1/s,
// raised to 2/s at T0: 2 s later x/time has 6 tokens; sluice has 6 when
// the key was peeked at the change, 4 when it was not (6 s of backlog at
// the old 1 s each, as 6 events used).
func TestSetLimitUnseenKey(t *testing.T) {
	to := ratelimit.Limit{Rate: 2, Period: time.Second, Burst: 10}
	for _, seen := range []bool{true, false} {
		l, x, clock := newPair(t, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 10})
		if err := l.SetLimit(to); err != nil {
			t.Fatal(err)
		}
		x.SetLimitAt(ratelimittest.T0, rate.Limit(2))
		if seen {
			peek(t, l)
		}
		later := ratelimittest.T0.Add(2 * time.Second)
		clock.Set(later)
		want := int64(6)
		if !seen {
			want = 4
		}
		if d, tok := peek(t, l), x.TokensAt(later); d.Remaining != want || tok != 6 {
			t.Errorf("peeked at the change %v: sluice remaining %d, x/time tokens %v; want %d and 6", seen, d.Remaining, tok, want)
		}
	}
}
