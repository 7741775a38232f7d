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
	set := func(key string, b []byte) {
		t.Helper()
		if err := e.client.Do(ctx, e.client.B().Set().Key(key).Value(string(b)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
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
