package reference

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"golang.org/x/time/rate"
)

func xLimiter(lim ratelimit.Limit) *rate.Limiter {
	lim = lim.Normalize()
	return rate.NewLimiter(rate.Limit(float64(lim.Rate)/lim.Period.Seconds()), int(lim.Burst))
}

// TestAdmitTablesAgainstXTime replays every AdmitTable of the conformance
// suite against x/time/rate itself: the tables say what x/time admits, and
// this is the proof.
func TestAdmitTablesAgainstXTime(t *testing.T) {
	tables := ratelimittest.AdmitTables()
	if len(tables) == 0 {
		t.Fatal("no AdmitTables")
	}
	for _, tb := range tables {
		t.Run(tb.Name, func(t *testing.T) {
			if tb.Algorithm != ratelimit.TokenBucket {
				t.Skipf("algorithm %v: x/time/rate is a token bucket", tb.Algorithm)
			}
			l := xLimiter(tb.Limit)
			for i, s := range tb.Steps {
				got := l.AllowN(ratelimittest.T0.Add(s.At), int(s.N))
				if got != s.Admit {
					t.Errorf("step %d: x/time AllowN(T0+%v, %d) = %v, table says %v", i, s.At, s.N, got, s.Admit)
				}
			}
		})
	}
}

// seqStep is one request of a random sequence.
type seqStep struct {
	at time.Duration // since T0, a whole number of µs
	n  int64
}

// randomLimit draws a valid limit, half the time one whose emission
// interval is not a whole number of nanoseconds (3/s, 7/250ms, …).
func randomLimit(rng *rand.Rand) ratelimit.Limit {
	periods := []time.Duration{time.Millisecond, 250 * time.Millisecond, time.Second, 7 * time.Second, time.Minute, time.Hour}
	for {
		var lim ratelimit.Limit
		switch rng.IntN(4) {
		case 0: // small odd rates over round periods: 3/s, 7/250ms, 11/1m
			lim.Rate = []int64{3, 7, 11, 13, 17, 30, 49, 97}[rng.IntN(8)]
			lim.Period = periods[rng.IntN(len(periods))]
		case 1: // any rate over a round period
			lim.Rate = 1 + rng.Int64N(5000)
			lim.Period = periods[rng.IntN(len(periods))]
		case 2: // any period, in ns
			lim.Rate = 1 + rng.Int64N(100)
			lim.Period = time.Duration(1 + rng.Int64N(int64(10*time.Second)))
		default: // divisible: the interval is exact
			lim.Period = periods[rng.IntN(len(periods))]
			for lim.Rate = 1 + rng.Int64N(1000); int64(lim.Period)%lim.Rate != 0; lim.Rate-- {
			}
		}
		if rng.IntN(5) == 0 {
			lim.Burst = 1
		} else {
			lim.Burst = 1 + rng.Int64N(50)
		}
		if lim.Validate() == nil && lim.Interval() >= time.Microsecond/10 {
			return lim
		}
	}
}

// randomSequence draws monotonic µs timestamps that keep the bucket near
// its edge: bursts at one instant, gaps around whole multiples of the
// interval, long idles that refill it.
func randomSequence(rng *rand.Rand, lim ratelimit.Limit, steps int) []seqStep {
	lim = lim.Normalize()
	iv := float64(lim.Period) / float64(lim.Rate) // exact interval, ns
	const us = int64(time.Microsecond)
	seq := make([]seqStep, steps)
	at := int64(0)
	for i := range seq {
		var gap int64
		switch r := rng.IntN(10); {
		case r < 3: // same instant
		case r < 6: // anywhere within two intervals
			gap = rng.Int64N(int64(2*iv)/us+1) * us
		case r < 9: // a whole number of intervals, to the µs, ±1 µs
			k := float64(1 + rng.IntN(3))
			gap = (int64(k*iv)/us + rng.Int64N(3) - 1) * us
		default: // idle, up to two full refills
			gap = rng.Int64N(int64(2*iv*float64(lim.Burst))/us+1) * us
		}
		at += max(gap, 0)
		n := int64(1)
		switch r := rng.IntN(10); {
		case r == 0:
			n = 0
		case r < 4:
			n = 1 + rng.Int64N(lim.Burst+1) // up to Burst+1: never admitted
		}
		seq[i] = seqStep{at: time.Duration(at), n: n}
	}
	return seq
}

// knownTruncation is true while sluice computes the emission interval
// Period/Rate truncated to the nanosecond (ratelimit.Limit.Interval): for
// a Rate that does not divide Period, sluice's bucket refills up to 1 ns
// per event early, so after k events without a full refill it admits up to
// k·(Period mod Rate)/Rate ns early. The differential test then checks
// that every such disagreement is exactly that, and no more; set it to
// false when the core keeps the interval exact, and the test demands
// identical admits everywhere except x/time's own sub-nanosecond rounding.
const knownTruncation = true

// gcraModel is a token bucket in exact integer arithmetic, time counted in
// units of 1/Rate ns so that Period/Rate is exactly Period units:
//
//   - exact: the ideal bucket; a request is admitted when it overshoots by
//     nothing;
//   - xtime: what x/time/rate computes in float64, made exact: it admits a
//     request that overshoots by less than 1 ns, because
//     Limit.durationFromTokens truncates the wait to whole nanoseconds and
//     a zero wait is admitted;
//   - trunc: sluice's step as specified, with the interval truncated to
//     whole nanoseconds.
type gcraModel struct {
	rate, period, burst int64
	tol                 int64 // admitted overshoot, units (exclusive)
	tat                 int64 // theoretical arrival time, units since T0
	sinceFull           int64 // events admitted since the bucket was last full
}

func newModel(lim ratelimit.Limit, kind string) *gcraModel {
	lim = lim.Normalize()
	m := &gcraModel{rate: lim.Rate, period: int64(lim.Period), burst: lim.Burst, tol: 1}
	switch kind {
	case "xtime":
		m.tol = lim.Rate // 1 ns
	case "trunc":
		m.period = int64(lim.Interval()) // rate 1: units are ns
		m.rate = 1
	}
	return m
}

// excess returns by how much (ns, fractional) a request of n at at (ns
// since T0) overshoots the bucket: ≤ 0 is admitted.
func (m *gcraModel) excess(at, n int64) float64 {
	now := at * m.rate
	return float64(max(m.tat, now)+n*m.period-now-m.burst*m.period) / float64(m.rate)
}

func (m *gcraModel) allow(at, n int64) bool {
	if n == 0 {
		return true
	}
	if n > m.burst {
		return false
	}
	now := at * m.rate
	if m.tat <= now {
		m.sinceFull = 0
	}
	base := max(m.tat, now)
	if base+n*m.period-now-m.burst*m.period >= m.tol {
		return false
	}
	m.tat = base + n*m.period
	m.sinceFull += n
	return true
}

// tally counts how sequences ended.
type tally struct {
	sequences, requests int
	fractional          int // sequences whose interval is not whole ns
	truncation          int // stopped at an over-admission from the truncated interval
	xtimeRounding       int // stopped at x/time admitting a sub-ns overshoot
	maxTruncExcess      float64
}

// replay runs seq through sluice (TokenBucket in memstore, clock injected),
// x/time/rate and the models, checks every step, and stops at the first
// disagreement it can explain (the states differ after it).
func replay(t *testing.T, store *memstore.Store, clock *ratelimittest.Clock, key string, lim ratelimit.Limit, seq []seqStep, tl *tally) {
	t.Helper()
	x := xLimiter(lim)
	exact, xref, trunc := newModel(lim, "exact"), newModel(lim, "xtime"), newModel(lim, "trunc")
	norm := lim.Normalize()
	frac := float64(int64(norm.Period)%norm.Rate) / float64(norm.Rate) // ns lost per event
	ctx := context.Background()
	tl.sequences++
	if frac != 0 {
		tl.fractional++
	}
	for i, s := range seq {
		tl.requests++
		at := ratelimittest.T0.Add(s.at)
		clock.Set(at)
		d, err := store.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.TokenBucket, N: s.n})
		if err != nil {
			t.Fatalf("step %d: Apply: %v", i, err)
		}
		exc := exact.excess(int64(s.at), s.n)
		// The truncation puts sluice's TAT behind the exact one by frac
		// per event admitted since the exact bucket was last full (the
		// two have admitted the same events so far).
		drift := float64(exact.sinceFull) * frac
		if exact.tat <= int64(s.at)*exact.rate {
			drift = 0
		}
		wantExact := exact.allow(int64(s.at), s.n)
		wantX := xref.allow(int64(s.at), s.n)
		wantTrunc := trunc.allow(int64(s.at), s.n)
		gotX := x.AllowN(at, int(s.n))
		where := func() string {
			return fmt.Sprintf("limit %v (interval %v, exact %.3f ns), step %d (T0+%v, n=%d): sluice %v, x/time %v; exact %v (overshoot %.4g ns)",
				lim, norm.Interval(), float64(norm.Period)/float64(norm.Rate), i, s.at, s.n, d.Allowed, gotX, wantExact, exc)
		}
		switch {
		case d.Allowed != wantTrunc:
			t.Fatalf("sluice does not follow its own step: %s; model %v", where(), wantTrunc)
		case gotX != wantX:
			t.Fatalf("x/time differs from its exact model (a float64 artefact?): %s", where())
		case d.Allowed != gotX && wantTrunc != wantExact:
			// sluice's truncated interval: an early admit, within the
			// drift the truncation accumulates.
			if !knownTruncation {
				t.Errorf("sluice over-admits from its truncated interval: %s", where())
			}
			if !(d.Allowed && !wantExact && exc > 0 && exc <= drift+1e-9) {
				t.Fatalf("a disagreement the truncated interval does not explain (drift %.4g ns): %s", drift, where())
			}
			tl.truncation++
			tl.maxTruncExcess = max(tl.maxTruncExcess, exc)
			return
		case d.Allowed != gotX:
			// x/time admits an overshoot of less than a nanosecond; only
			// possible when the interval is not whole nanoseconds.
			if frac == 0 || !(gotX && !d.Allowed && exc > 0 && exc < 1) {
				t.Fatalf("a disagreement x/time's rounding does not explain: %s", where())
			}
			tl.xtimeRounding++
			return
		}
	}
}

// TestDifferentialXTime feeds sluice's TokenBucket and x/time/rate the same
// random sequences and demands the same admits, except where the
// difference is x/time's sub-nanosecond rounding or (while knownTruncation)
// sluice's truncated interval, both checked against exact arithmetic.
func TestDifferentialXTime(t *testing.T) {
	cases, steps := 3000, 400
	if testing.Short() {
		cases = 300
	}
	clock := ratelimittest.NewClock(ratelimittest.T0)
	store := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1, MaxKeys: -1})
	defer store.Close()
	rng := rand.New(rand.NewPCG(2, 2026))
	var tl tally
	for c := range cases {
		lim := randomLimit(rng)
		replay(t, store, clock, fmt.Sprint("diff/", c), lim, randomSequence(rng, lim, steps), &tl)
	}
	t.Logf("%d requests in %d sequences (%d with an interval that is not whole ns): identical admits except %d sequences stopped at sluice's truncated interval (overshoot up to %.3g ns) and %d at x/time's sub-ns rounding",
		tl.requests, tl.sequences, tl.fractional, tl.truncation, tl.maxTruncExcess, tl.xtimeRounding)
}

// TestTruncatedInterval pins the one place sluice's token bucket and
// x/time/rate part: at 3 a second the emission interval is 333333333.3 ns
// and sluice uses 333333333 ns. Requests arriving exactly every 333333333
// ns (nanosecond timestamps) are all admitted by sluice; x/time, like the
// exact bucket, is a third of a nanosecond short on every one after the
// first and admits the ones its sub-ns rounding forgives. Over a long run
// the difference is a rate error of (Period mod Rate)/Rate ns per interval:
// 1e-9 here, under 1e-6 for any interval of a millisecond or more.
func TestTruncatedInterval(t *testing.T) {
	lim := ratelimit.Limit{Rate: 3, Period: time.Second, Burst: 1}
	clock := ratelimittest.NewClock(ratelimittest.T0)
	store := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	defer store.Close()
	x := xLimiter(lim)
	exact := newModel(lim, "exact")
	const steps = 300
	var sluice, xtime, ideal int
	for k := range int64(steps) {
		at := k * int64(lim.Interval())
		clock.Set(ratelimittest.T0.Add(time.Duration(at)))
		d, err := store.Apply(context.Background(), ratelimit.Request{Key: "thirds", Limit: lim, Algorithm: ratelimit.TokenBucket, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			sluice++
		}
		if x.AllowN(ratelimittest.T0.Add(time.Duration(at)), 1) {
			xtime++
		}
		if exact.allow(at, 1) {
			ideal++
		}
	}
	t.Logf("requests every %v at %v: sluice admits %d of %d, x/time %d, the exact bucket %d", lim.Interval(), lim, sluice, steps, xtime, ideal)
	if !knownTruncation && sluice != xtime {
		t.Errorf("sluice admits %d, x/time %d", sluice, xtime)
	}
	if knownTruncation && sluice == xtime {
		t.Errorf("sluice and x/time agree (%d): the interval is exact now; set knownTruncation = false", sluice)
	}
}

// TestLimitChangeAgainstXTime checks a limit change against x/time/rate's
// SetLimitAt, which keeps the bucket's tokens: with the burst unchanged,
// tokens kept are used events kept, so memstore (converting the key's
// state when a request under the new limit meets it: here a peek at the
// change) admits the same sequence. 3 used of 5 at 5/min; 6 s later the
// rate becomes 50/min (2.5 tokens), then requests 300 ms apart.
func TestLimitChangeAgainstXTime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to ratelimit.Limit
	}{
		{"raise", ratelimit.Limit{Rate: 5, Period: time.Minute, Burst: 5}, ratelimit.Limit{Rate: 50, Period: time.Minute, Burst: 5}},
		{"lower", ratelimit.Limit{Rate: 50, Period: time.Minute, Burst: 5}, ratelimit.Limit{Rate: 5, Period: time.Minute, Burst: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.T0)
			s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
			defer s.Close()
			x := xLimiter(tc.from)
			ctx := context.Background()
			apply := func(at time.Duration, lim ratelimit.Limit, n int64) bool {
				clock.Set(ratelimittest.T0.Add(at))
				d, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: lim, Algorithm: ratelimit.TokenBucket, N: n})
				if err != nil {
					t.Fatal(err)
				}
				return d.Allowed
			}
			for i := range 3 {
				if got, want := apply(0, tc.from, 1), x.AllowN(ratelimittest.T0, 1); got != want || !got {
					t.Fatalf("request %d: memstore %v, x/time %v, want both admitted", i, got, want)
				}
			}
			change := 6 * time.Second
			x.SetLimitAt(ratelimittest.T0.Add(change), xLimiter(tc.to).Limit())
			apply(change, tc.to, 0)
			admitted := 0
			for i := range 40 {
				at := change + time.Duration(i)*300*time.Millisecond
				got, want := apply(at, tc.to, 1), x.AllowN(ratelimittest.T0.Add(at), 1)
				if got != want {
					t.Fatalf("request %d at T0+%v: memstore %v, x/time %v", i, at, got, want)
				}
				if got {
					admitted++
				}
			}
			t.Logf("%d of 40 admitted after the change, as x/time/rate", admitted)
		})
	}
}
