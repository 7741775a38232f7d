package memstore_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// TestWindowTablesMatchSteps checks the window and sliding-log keys'
// tables (24-byte slots, counts and logs spilled into maps when they do
// not fit) against the algorithms' pure steps, which keep whole
// window.States and slidinglog.Logs: random requests and refunds on a few
// keys, under a fixed window and a sliding counter in turn on the same key
// (they share its state), with two periods (a change rescales) and two
// rates, one of which lets counts pass what a slot holds (2^23 and 2^24
// events a window) and come back under it; the same keys as sliding logs,
// whose logs grow past the one entry a slot holds and shrink back, with
// sweeps, resets and snapshot round trips along the way. Every decision
// must be the one the steps give.
func TestWindowTablesMatchSteps(t *testing.T) {
	for seed := range uint64(4) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			windowTablesMatchSteps(t, seed)
		})
	}
}

func windowTablesMatchSteps(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 21))
	clock := ratelimittest.NewClock(ratelimittest.T0)
	newStore := func() *memstore.Store {
		// One shard of tiny tables, so that their probe runs collide,
		// wrap around and move on deletion.
		return memstore.New(memstore.Options{Now: clock.Now, Shards: 1, MaxKeys: -1, SweepInterval: -1})
	}
	s := newStore()
	defer func() { s.Close() }()

	wins := map[string]winRef{}
	logs := map[string]*slidinglog.Log{}
	logPeriods := map[string]time.Duration{} // the period of a log's last request
	periods := []time.Duration{time.Second, 3 * time.Second}
	rates := []int64{5, 1 << 26}
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	spilledWin, bigLog := 0, 0
	for step := range 6000 {
		// Time only moves forward: a swept or unrestored expired state is
		// then the same as an absent one.
		if rng.IntN(3) == 0 {
			clock.Set(clock.Now().Add(time.Duration(rng.Int64N(int64(2 * time.Second)))))
		} else if rng.IntN(2) == 0 {
			clock.Set(clock.Now().Add(time.Duration(rng.Int64N(int64(time.Millisecond)))))
		}
		now := clock.Now().UnixNano()
		key := keys[rng.IntN(len(keys))]
		lim := ratelimit.Limit{Rate: rates[rng.IntN(2)], Period: periods[rng.IntN(2)]}
		n := int64(rng.IntN(4))
		if lim.Rate > 5 && rng.IntN(2) == 0 {
			n = rng.Int64N(1 << 25) // past a slot's counts, in a few requests
		}
		refund := rng.IntN(6) == 0
		req := ratelimit.Request{Key: key, Limit: lim, N: n, Refund: refund}
		var want ratelimit.Decision
		switch alg := rng.IntN(3); alg {
		case 0, 1:
			req.Algorithm = ratelimit.FixedWindow
			if alg == 1 {
				req.Algorithm = ratelimit.SlidingWindowCounter
			}
			want = stepWindow(wins, req, now)
			if r, ok := wins[key]; ok && (r.st.Prev >= 1<<23-1 || r.st.Curr >= 1<<24) {
				spilledWin++
			}
		default:
			req.Algorithm = ratelimit.SlidingWindowLog
			l := logs[key]
			if l == nil {
				l = &slidinglog.Log{}
			}
			if refund {
				l.Refund(now, lim.Period, n)
				want = l.Step(now, ratelimit.Request{Limit: lim})
			} else {
				want = l.Step(now, req)
			}
			if len(l.Entries()) == 0 {
				delete(logs, key)
			} else {
				logs[key], logPeriods[key] = l, lim.Period
			}
			if len(l.Entries()) > 1 {
				bigLog++
			}
		}
		got, err := s.Apply(ctx, req)
		if err != nil {
			t.Fatalf("step %d: %+v: %v", step, req, err)
		}
		if got != want {
			t.Fatalf("step %d: %+v at %d: got %+v, want %+v", step, req, now, got, want)
		}
		// What Sweep and Snapshot drop: the states that have expired, a
		// window's by the algorithm and period that stored it last (a
		// sliding counter's state is kept a window longer than a fixed
		// window's), a log's by the period of its last request.
		expire := func() {
			for k, r := range wins {
				if r.st.Expiry(r.sliding, time.Duration(r.period)) <= now {
					delete(wins, k)
				}
			}
			for k, l := range logs {
				if l.Expiry(logPeriods[k]) <= now {
					delete(logs, k)
				}
			}
		}
		switch rng.IntN(200) {
		case 0:
			s.Sweep()
			expire()
		case 1:
			k := keys[rng.IntN(len(keys))]
			if err := s.Reset(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(wins, k)
			delete(logs, k)
		case 2:
			var buf bytes.Buffer
			if err := s.Snapshot(&buf); err != nil {
				t.Fatal(err)
			}
			expire()
			s.Close()
			s = newStore()
			if err := s.Restore(&buf); err != nil {
				t.Fatal(err)
			}
		}
		if step%50 == 0 {
			// The store drops what the steps still hold only when it has
			// expired (Sweep, Restore), never more.
			s.Sweep()
			expire()
			if got := s.Len(); got > len(wins)+len(logs) {
				t.Fatalf("step %d: the store holds %d keys, the steps %d", step, got, len(wins)+len(logs))
			}
		}
	}
	if spilledWin == 0 || bigLog == 0 {
		t.Errorf("the run never spilled a window (%d) or grew a log past one entry (%d)", spilledWin, bigLog)
	}
}

// winRef is a window key's state in TestWindowTablesMatchSteps, and the
// period it was counted under.
type winRef struct {
	st      window.State
	period  int64
	sliding bool // stored by a sliding counter's request: its expiry
}

// stepWindow applies req (a fixed window or a sliding counter) at now to
// the reference states, as the store does: a state counted under another
// period is rescaled (a request of a zero rate does not rescale; a refund
// does), and stored whenever it changed or was rescaled.
func stepWindow(wins map[string]winRef, req ratelimit.Request, now int64) ratelimit.Decision {
	sliding := req.Algorithm == ratelimit.SlidingWindowCounter
	w := int64(req.Limit.Period)
	r, ok := wins[req.Key]
	old, rescaled := r.st, false
	if ok && r.period != w && (req.Refund || req.Limit.Rate > 0) {
		old, rescaled = window.Rescale(old, now, r.period, w, sliding), true
	}
	step := window.Fixed
	if sliding {
		step = window.Sliding
	}
	if req.Refund {
		st, took := window.Refund(old, now, w, req.N, sliding)
		_, d := step(st, now, ratelimit.Request{Limit: req.Limit})
		switch {
		case !ok || (!took && !rescaled):
		case st == (window.State{}):
			delete(wins, req.Key)
		default:
			wins[req.Key] = winRef{st, w, sliding}
		}
		return d
	}
	st, d := step(old, now, req)
	switch {
	case rescaled && st == (window.State{}):
		delete(wins, req.Key)
	case st != old || rescaled:
		wins[req.Key] = winRef{st, w, sliding}
	}
	return d
}
