package redisstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// oneKey returns what Redis holds for key's fixed window on e: the value
// of its key and that key's expiry (Unix ms; -2 when absent), and whether
// a marker is there.
func oneKey(t *testing.T, e env, s *redisstore.Store, key string) (string, int64, bool) {
	t.Helper()
	ctx := context.Background()
	k := s.Key(ratelimit.FixedWindow, key)
	v, _ := e.client.Do(ctx, e.client.B().Get().Key(k).Build()).ToString()
	exp, err := e.client.Do(ctx, e.client.B().Pexpiretime().Key(k).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.client.Do(ctx, e.client.B().Exists().Key(s.MarkerKey(key)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return v, exp, m != 0
}

// redisMillis returns e's clock (the node of key's on a cluster), in Unix
// milliseconds.
func redisMillis(t *testing.T, e env, key string) int64 {
	t.Helper()
	node := redistest.Shared(t)
	if e.name == "cluster" {
		var err error
		if node, err = redistest.SharedCluster(t).NodeFor(key); err != nil {
			t.Fatal(err)
		}
	}
	return serverMillis(t, node)
}

// wantOneKey fails t unless key's fixed window is the integer count want
// in its one key, expiring at the end of the window of period p that
// holds Redis's time, with no marker.
func wantOneKey(t *testing.T, e env, s *redisstore.Store, key string, want int64, p time.Duration, what string) {
	t.Helper()
	v, exp, marker := oneKey(t, e, s, key)
	now := redisMillis(t, e, s.Key(ratelimit.FixedWindow, key))
	end := now - now%p.Milliseconds() + p.Milliseconds()
	if v != strconv.FormatInt(want, 10) || exp != end || marker {
		t.Fatalf("%s: key holds %q expiring at %d (marker %v), want %d expiring at %d, the end of the %v window holding %d", what, v, exp, marker, want, end, p, now)
	}
}

// applyWant applies req and fails t on an error or a decision other than
// allowed with remaining.
func applyWant(t *testing.T, s *redisstore.Store, req ratelimit.Request, allowed bool, remaining int64, what string) {
	t.Helper()
	d, err := s.Apply(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d.Allowed != allowed || d.Remaining != remaining {
		t.Fatalf("%s: %+v, want allowed %v with Remaining %d", what, d, allowed, remaining)
	}
}

// hourly runs f on both servers with a store of its own prefix p on
// Redis's clock writing the one-key form at once (CompatWindow -1), for
// tests of hour-long windows; skipped when an hour's
// edge is near (a window that rolls during the test changes its counts).
func hourly(t *testing.T, f func(t *testing.T, e env, p string, s *redisstore.Store)) {
	both(t, func(t *testing.T, e env) {
		if windowEdgeNear(time.Hour) {
			t.Skip("an hour's edge is near")
		}
		p := prefix()
		f(t, e, p, newStore(t, e, redisstore.Options{Prefix: p, CompatWindow: -1}))
	})
}

// TestFastKeyBinaryState: a lone fixed-window charge on a key that holds a
// binary state (a sliding counter's) counts nothing there (INCRBY fails:
// not an integer) and goes to the script, which counts the state's
// events and writes the integer form in the one key; the next charge
// goes as plain commands and stands.
func TestFastKeyBinaryState(t *testing.T) {
	hourly(t, func(t *testing.T, e env, p string, s *redisstore.Store) {
		lim := ratelimit.Limit{Rate: 10, Period: time.Hour}
		req := ratelimit.Request{Key: "binary", Limit: lim, Algorithm: ratelimit.SlidingWindowCounter, N: 1}
		for i := range 3 {
			applyWant(t, s, req, true, int64(9-i), "sliding charge")
		}
		if v, _, _ := oneKey(t, e, s, req.Key); len(v) != 28 {
			t.Fatalf("after the sliding counter's charges the key holds %q, want its 28-byte binary state", v)
		}
		req.Algorithm = ratelimit.FixedWindow
		before := s.Stats()
		applyWant(t, s, req, true, 6, "a fixed charge on the binary state")
		if st := s.Stats(); st.Commands != before.Commands+1 || st.FellBack != before.FellBack+1 {
			t.Fatalf("stats %+v after %+v: want one plain-command charge, fallen back", st, before)
		}
		wantOneKey(t, e, s, req.Key, 4, time.Hour, "after the script")
		before = s.Stats()
		applyWant(t, s, req, true, 5, "the next fixed charge")
		if st := s.Stats(); st.Commands != before.Commands+1 || st.FellBack != before.FellBack {
			t.Fatalf("stats %+v after %+v: want one plain-command charge that stood", st, before)
		}
		wantOneKey(t, e, s, req.Key, 5, time.Hour, "after plain commands")
		if e.name == "cluster" {
			// The one key is on the readable name's node.
			cl := redistest.SharedCluster(t)
			want, err := cl.NodeFor(readable(p, "c", req.Key))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := cl.NodeFor(s.Key(ratelimit.FixedWindow, req.Key)); err != nil || got != want {
				t.Fatalf("the key is on %v, want %v (%v)", got, want, err)
			}
		}
	})
}

// TestFastKeyPeriodChange: a limit whose period changes carries its count
// both ways between the one key's integer forms (window.Rescale: never
// more admitted than either period allows), and the key then expires at
// the end of the new period's window.
func TestFastKeyPeriodChange(t *testing.T) {
	hourly(t, func(t *testing.T, e env, p string, s *redisstore.Store) {
		script := newStore(t, e, redisstore.Options{Prefix: p, ScriptOnly: true, CompatWindow: -1})
		hour := ratelimit.Request{Key: "period", Limit: ratelimit.Limit{Rate: 10, Period: time.Hour}, Algorithm: ratelimit.FixedWindow, N: 1}
		two := hour
		two.Limit.Period = 2 * time.Hour
		for i := range 3 {
			applyWant(t, s, hour, true, int64(9-i), "an hour's charge")
		}
		wantOneKey(t, e, s, hour.Key, 3, time.Hour, "under an hour")
		applyWant(t, s, two, true, 6, "two hours' first charge")
		wantOneKey(t, e, s, hour.Key, 4, 2*time.Hour, "under two hours")
		applyWant(t, s, hour, true, 5, "an hour's charge again")
		for i := range 5 {
			applyWant(t, s, hour, true, int64(4-i), "an hour's charges to the limit")
		}
		applyWant(t, s, hour, false, 0, "an hour's charge past the limit")
		applyWant(t, s, two, false, 0, "two hours' charge past the limit")
		hour.N = 0
		applyWant(t, script, hour, true, 0, "a script's peek")
		// A denial counted nothing: 10 in the key, whichever window it
		// names (the two hours' that the hour ends with, or that holds
		// it: the count stays until its end).
		if v, _, marker := oneKey(t, e, s, hour.Key); v != "10" || marker {
			t.Fatalf("the key holds %q (marker %v), want 10", v, marker)
		}
	})
}

// TestFastKeyReadsMarkerForm: a fixed window that the version before
// wrote in the marker form (a marker naming the window, and a count key
// of its own) is read: a lone charge finds the marker (EXISTS, while
// states of before may be there), counts nothing, and the script moves
// the count into the one key; the next charge stands.
func TestFastKeyReadsMarkerForm(t *testing.T) {
	hourly(t, func(t *testing.T, e env, _ string, s *redisstore.Store) {
		ctx := context.Background()
		req := ratelimit.Request{Key: "before", Limit: ratelimit.Limit{Rate: 10, Period: time.Hour}, Algorithm: ratelimit.FixedWindow, N: 1}
		m := s.MarkerKey(req.Key)
		now := redisMillis(t, e, m)
		start := now - now%3600000
		mval := fmt.Sprintf("3600000:%d", start)
		at := strconv.FormatInt(start+3600000-1, 10)
		for _, kv := range [][2]string{{m + ":" + mval, "7"}, {m, mval}} {
			if err := e.client.Do(ctx, e.client.B().Set().Key(kv[0]).Value(kv[1]).Pxat(time.UnixMilli(start+3600000-1)).Build()).Error(); err != nil {
				t.Fatal(err, at)
			}
		}
		before := s.Stats()
		applyWant(t, s, req, true, 2, "a charge on the marker form")
		if st := s.Stats(); st.Commands != before.Commands+1 || st.FellBack != before.FellBack+1 {
			t.Fatalf("stats %+v after %+v: want one plain-command charge, fallen back", st, before)
		}
		wantOneKey(t, e, s, req.Key, 8, time.Hour, "after the script")
		if n, err := e.client.Do(ctx, e.client.B().Exists().Key(m+":"+mval).Build()).AsInt64(); err != nil || n != 0 {
			t.Fatalf("the marker form's count is still there (%d, %v)", n, err)
		}
		applyWant(t, s, req, true, 1, "the next charge")
		wantOneKey(t, e, s, req.Key, 9, time.Hour, "after plain commands")
	})
}

// TestPackedReadsOneKey switches a fixed window on Redis's clock from the
// string layout's one key (an integer count) to the packed layout: the
// packed store counts on from it, the string key goes, and the hash's
// field holds the binary state (the packed layout has no integer form);
// the one key's expiry, its window's end, is read as the string layout
// reads it (a day's count under an hour's limit stays in the hour that
// ends with the day).
func TestPackedReadsOneKey(t *testing.T) {
	hourly(t, func(t *testing.T, e env, p string, s *redisstore.Store) {
		packed := newStore(t, e, redisstore.Options{Prefix: p, Layout: redisstore.LayoutPacked})
		req := ratelimit.Request{Key: "switch", Limit: ratelimit.Limit{Rate: 10, Period: time.Hour}, Algorithm: ratelimit.FixedWindow, N: 1}
		for i := range 4 {
			applyWant(t, s, req, true, int64(9-i), "a string-layout charge")
		}
		wantOneKey(t, e, s, req.Key, 4, time.Hour, "in the string layout")
		applyWant(t, packed, req, true, 5, "the packed store's charge")
		n := nodeOf(t, e, s.Key(ratelimit.FixedWindow, req.Key))
		if v := do(t, n, "EXISTS", s.Key(ratelimit.FixedWindow, req.Key)); v != int64(0) {
			t.Fatal("the one key is still there after the packed store moved it")
		}
		h, f, _ := packed.Field(ratelimit.FixedWindow, req.Key)
		if v, ok := do(t, n, "HGET", h, f).(string); !ok || len(v) != 28 {
			t.Fatalf("the packed field holds %q, want the 28-byte binary state", v)
		}
		applyWant(t, packed, req, true, 4, "the packed store's next charge")

		// A day's count moved under an hour's limit: its window ends at
		// the day's end, later than the hour's, and stays the hour's window
		// ending there (as in the string layout), not the current hour.
		if time.Now().UTC().Hour() == 23 {
			return // the day's last hour is the current one
		}
		day := req
		day.Key, day.Limit.Period = "switch-day", 24*time.Hour
		applyWant(t, s, day, true, 9, "a day's charge in the string layout")
		hour := day
		hour.Limit.Period = time.Hour
		applyWant(t, packed, hour, true, 8, "the packed store's hour charge")
		h, f, _ = packed.Field(ratelimit.FixedWindow, day.Key)
		v, _ := do(t, nodeOf(t, e, h), "HGET", h, f).(string)
		end := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		if len(v) != 28 || int64(binary.LittleEndian.Uint32([]byte(v[:4]))) != end.Add(-time.Hour).Unix() {
			t.Fatalf("the packed field holds %q, want the binary state of the hour ending at %v", v, end)
		}
	})
}
