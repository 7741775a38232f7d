package redisstore_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestReadsStatesWithoutTheirLimit writes states in the layouts of before
// limits were kept with them (a 12-byte TAT, 36-byte counters) and checks
// that they are still read, taken as made under the first limit that
// meets them, and then carry that limit into a change: 3 used of 5/min
// become 3 used of 50/min.
func TestReadsStatesWithoutTheirLimit(t *testing.T) {
	e := standalone(t)
	now := ratelimittest.T0.Add(10 * time.Second)
	s := newStore(t, e, redisstore.Options{Now: fixedClock(now)})
	ctx := context.Background()
	le := binary.LittleEndian
	set := func(key string, b []byte) { setRaw(t, e, key, b) }
	// GCRA: TAT = now + 36 s, 3 events of 12 s.
	tat := now.Add(36 * time.Second)
	b := le.AppendUint64(nil, uint64(tat.Unix()))
	b = le.AppendUint32(b, uint32(tat.Nanosecond()))
	set(s.Key(ratelimit.GCRA, "old"), b)
	// Fixed window: 3 counted in the minute starting at T0.
	w := le.AppendUint64(nil, uint64(ratelimittest.T0.Unix()))
	w = le.AppendUint32(w, 0)
	w = le.AppendUint64(w, 0)
	w = le.AppendUint64(w, 3)
	w = le.AppendUint64(w, 0)
	set(s.Key(ratelimit.FixedWindow, "old"), w)

	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		for i, step := range []struct {
			lim  ratelimit.Limit
			want int64
		}{
			{ratelimit.PerMinute(5), 2},   // read as it was
			{ratelimit.PerMinute(5), 1},   // charged: now with its limit
			{ratelimit.PerMinute(50), 46}, // 4 used carry over
		} {
			n := int64(1)
			if i != 1 {
				n = 0
			}
			d, err := s.Apply(ctx, ratelimit.Request{Key: "old", Limit: step.lim, Algorithm: alg, N: n})
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != step.want {
				t.Errorf("%v step %d under %v: remaining %d, want %d", alg, i, step.lim, d.Remaining, step.want)
			}
		}
	}
}

// TestReadsWideStates writes states in the wide forms (a 20-byte TAT and
// interval, 48-byte counters), which an older sluice wrote for every key
// and this one still writes for values past 32 bits, and checks that they
// are read with their limit and written back in the narrow forms (12 and
// 28 bytes) once charged.
func TestReadsWideStates(t *testing.T) {
	e := standalone(t)
	now := ratelimittest.T0.Add(10 * time.Second)
	s := newStore(t, e, redisstore.Options{Now: fixedClock(now), ScriptOnly: true})
	ctx := context.Background()
	le := binary.LittleEndian
	get := func(key string) string {
		t.Helper()
		v, err := e.client.Do(ctx, e.client.B().Get().Key(key).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	set := func(key string, b []byte) { setRaw(t, e, key, b) }
	// GCRA: TAT = now + 3 s, 3 events of 1 s (5 per 5 s), with its
	// interval.
	tat := now.Add(3 * time.Second)
	b := le.AppendUint64(nil, uint64(tat.Unix()))
	b = le.AppendUint32(b, uint32(tat.Nanosecond()))
	b = le.AppendUint64(b, uint64(time.Second))
	set(s.Key(ratelimit.GCRA, "wide"), b)
	// Fixed window: 3 counted in the 5 s holding now, with its period.
	w := le.AppendUint64(nil, uint64(now.Truncate(5*time.Second).Unix()))
	w = le.AppendUint32(w, 0)
	w = le.AppendUint64(w, 0)
	w = le.AppendUint64(w, 3)
	w = le.AppendUint64(w, 0)
	w = le.AppendUint64(w, 5)
	w = le.AppendUint32(w, 0)
	set(s.Key(ratelimit.FixedWindow, "wide"), w)

	for alg, narrow := range map[ratelimit.Algorithm]int{ratelimit.GCRA: 12, ratelimit.FixedWindow: 28} {
		for i, want := range []int64{2, 1, 11} {
			lim, n := ratelimit.Limit{Rate: 5, Period: 5 * time.Second}, int64(1)
			if i == 0 {
				n = 0 // read as it was
			}
			if i == 2 {
				lim, n = ratelimit.Limit{Rate: 15, Period: 5 * time.Second}, 0 // 4 used carry over
			}
			d, err := s.Apply(ctx, ratelimit.Request{Key: "wide", Limit: lim, Algorithm: alg, N: n})
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != want {
				t.Errorf("%v step %d under %v: remaining %d, want %d", alg, i, lim, d.Remaining, want)
			}
			if i == 1 {
				if v := get(s.Key(alg, "wide")); len(v) != narrow {
					t.Errorf("%v: charged, the state is %d bytes, want %d", alg, len(v), narrow)
				}
			}
		}
	}
}

// setRaw writes b at key, as an older store would have.
func setRaw(t *testing.T, e env, key string, b []byte) {
	t.Helper()
	if err := e.client.Do(context.Background(), e.client.B().Set().Key(key).Value(string(b)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}
