package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestCompactKeyNames checks the names' size and routing: whatever the
// key's length, every name of a key fits redis-server's 32-byte class (at
// most 30 bytes with the default prefix), names of different keys differ,
// and every name of one key (each shape's, the marker's) lives in the hash
// slot of the readable name it had before, so a Cluster keeps them
// together and a script reads the old one in the same call.
func TestCompactKeyNames(t *testing.T) {
	s := newStore(t, standalone(t), redisstore.Options{Prefix: redisstore.DefaultPrefix})
	seen := map[string]string{}
	for _, key := range []string{"a", "sl:gcra:60000ms:api_user_632be598c0ebccc7_", strings.Repeat("long", 16<<10), "with {braces} and \x00", "{tag}x", "ünïcødé"} {
		slot := redislink.Slot("sluice:t{" + key + "}")
		names := []string{s.MarkerKey(key)}
		for _, alg := range ratelimit.Algorithms() {
			names = append(names, s.Key(alg, key))
		}
		for _, n := range names {
			if len(n) > 30 {
				t.Errorf("key %.20q: name %q is %d bytes, want at most 30", key, n, len(n))
			}
			if got := redislink.Slot(n); got != slot {
				t.Errorf("key %.20q: name %q in slot %d, want the readable name's %d", key, n, got, slot)
			}
			if other, ok := seen[n]; ok && other != key {
				t.Errorf("keys %.20q and %.20q share the name %q", key, other, n)
			}
			seen[n] = key
		}
		if s.Key(ratelimit.GCRA, key) != s.Key(ratelimit.GCRA, key) {
			t.Errorf("key %.20q: two names", key)
		}
	}
}

// readable returns the name the layout before compact names gave a
// key's state of kind (a shape's tag, or "m" for the fixed window's
// marker).
func readable(prefix, kind, key string) string { return prefix + kind + "{" + key + "}" }

// toReadable moves every Redis key of key's state under store s to the
// name it had before compact names (the values are the same in both
// layouts): the state an older sluice left. It reports how many it moved.
func toReadable(t *testing.T, c rueidis.Client, s *redisstore.Store, prefix, key string) int {
	t.Helper()
	ctx := context.Background()
	moved := 0
	mv := func(from, to string) {
		t.Helper()
		n, err := c.Do(ctx, c.B().Exists().Key(from).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if err := c.Do(ctx, c.B().Rename().Key(from).Newkey(to).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		moved++
	}
	for kind, alg := range map[string]ratelimit.Algorithm{"t": ratelimit.GCRA, "c": ratelimit.FixedWindow, "l": ratelimit.SlidingWindowLog} {
		mv(s.Key(alg, key), readable(prefix, kind, key))
	}
	m := s.MarkerKey(key)
	if v, err := c.Do(ctx, c.B().Get().Key(m).Build()).ToString(); err == nil {
		mv(m+":"+v, readable(prefix, "m", key)+":"+v)
		mv(m, readable(prefix, "m", key))
	}
	return moved
}

// TestUpgradeFromReadableNames starts from states an older sluice wrote
// under the readable names (a TAT, a fixed window's marker and integer
// counter, its binary form, a sliding counter, a log): the store reads
// them, so that no counter starts again from full, nothing is admitted
// beyond the limit, and the state ends under its compact name.
func TestUpgradeFromReadableNames(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		ctx := context.Background()
		lim := ratelimit.PerMinute(5)
		for _, tc := range []struct {
			alg                     ratelimit.Algorithm
			scriptOnly, serverClock bool
		}{
			{ratelimit.GCRA, false, false}, {ratelimit.FixedWindow, false, false}, {ratelimit.FixedWindow, true, false},
			{ratelimit.SlidingWindowCounter, false, false}, {ratelimit.SlidingWindowLog, false, false},
			// Redis's clock, as in production: the readable names' expiries
			// are kept.
			{ratelimit.GCRA, false, true}, {ratelimit.FixedWindow, false, true}, {ratelimit.SlidingWindowCounter, false, true},
		} {
			name := fmt.Sprintf("%v/scriptonly=%v/serverclock=%v", tc.alg, tc.scriptOnly, tc.serverClock)
			t.Run(name, func(t *testing.T) {
				p := prefix()
				clock := ratelimittest.NewClock(ratelimittest.T0)
				lim := lim
				o := redisstore.Options{Prefix: p, Now: clock.Now, ScriptOnly: tc.scriptOnly}
				if tc.serverClock {
					// A day's window: the test does not cross one but at
					// midnight (UTC).
					o.Now, lim = nil, ratelimit.Limit{Rate: 5, Period: 24 * time.Hour}
				}
				s := newStore(t, e, o)
				req := ratelimit.Request{Key: "old", Limit: lim, Algorithm: tc.alg, N: 1}
				for range 3 {
					if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
						t.Fatalf("charge: %+v, %v", d, err)
					}
				}
				if n := toReadable(t, e.client, s, p, "old"); n == 0 {
					t.Fatal("no state to move")
				}
				clock.Set(ratelimittest.T0.Add(time.Second))
				var got []bool
				for range 4 {
					d, err := s.Apply(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, d.Allowed)
				}
				if fmt.Sprint(got) != "[true true false false]" {
					t.Errorf("after the upgrade: admitted %v, want [true true false false] (3 of 5 used before)", got)
				}
				n, err := e.client.Do(ctx, e.client.B().Exists().Key(s.Key(tc.alg, "old")).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				m, err := e.client.Do(ctx, e.client.B().Exists().Key(s.MarkerKey("old")).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				if n+m == 0 {
					t.Error("the state is not under its compact name")
				}
				for _, kind := range []string{"t", "c", "l", "m"} {
					if v, err := e.client.Do(ctx, e.client.B().Exists().Key(readable(p, kind, "old")).Build()).AsInt64(); err != nil || v != 0 {
						t.Errorf("readable name %q still held (%v, %v)", kind, v, err)
					}
				}
				// Reset finds both layouts.
				if err := s.Reset(ctx, "old"); err != nil {
					t.Fatal(err)
				}
				if d, err := s.Apply(ctx, req); err != nil || d.Remaining != 4 {
					t.Errorf("after Reset: %+v, %v; want 4 remaining", d, err)
				}
			})
		}
	})
}

// TestResetFindsReadableNames checks that Reset deletes a state still
// under its readable name (an operator resetting a key before it moved).
func TestResetFindsReadableNames(t *testing.T) {
	e := standalone(t)
	ctx := context.Background()
	p := prefix()
	clock := ratelimittest.NewClock(ratelimittest.T0)
	s := newStore(t, e, redisstore.Options{Prefix: p, Now: clock.Now})
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog} {
		req := ratelimit.Request{Key: "r", Limit: ratelimit.PerMinute(2), Algorithm: alg, N: 2}
		if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("%v: %+v, %v", alg, d, err)
		}
	}
	toReadable(t, e.client, s, p, "r")
	if err := s.Reset(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog} {
		req := ratelimit.Request{Key: "r", Limit: ratelimit.PerMinute(2), Algorithm: alg, N: 2}
		if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
			t.Errorf("%v after Reset: %+v, %v; want a full quota", alg, d, err)
		}
	}
}

// TestFreshKeysResetNoOne floods the store with fresh keys, all charged at
// once, and checks that a key charged before keeps its count: a name is a
// hash of the whole key, and no key's state is another's.
func TestFreshKeysResetNoOne(t *testing.T) {
	layouts(t, func(t *testing.T, e env) {
		ctx := context.Background()
		clock := ratelimittest.NewClock(ratelimittest.T0)
		s := newStore(t, e, redisstore.Options{Now: clock.Now})
		lim := ratelimit.PerMinute(3)
		for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter} {
			victim := ratelimit.Request{Key: "victim-" + alg.String(), Limit: lim, Algorithm: alg, N: 2}
			if d, err := s.Apply(ctx, victim); err != nil || !d.Allowed {
				t.Fatalf("%v: %+v, %v", alg, d, err)
			}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 250 {
						req := ratelimit.Request{Key: fmt.Sprintf("victim%d-%d", w, i), Limit: lim, Algorithm: alg, N: 3}
						if _, err := s.Apply(ctx, req); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			victim.N = 0
			if d, err := s.Apply(ctx, victim); err != nil || d.Remaining != 1 {
				t.Errorf("%v: after 2000 fresh keys the victim has %+v, %v; want 1 remaining", alg, d, err)
			}
		}
	})
}

// TestCompactNamesShareANode charges one key under every shape on the
// 3-master cluster (a fixed window alone, so that plain commands write its
// marker and counter) and checks that every Redis key holding its state
// is on one node, the one serving its readable name's slot.
func TestCompactNamesShareANode(t *testing.T) {
	e := cluster(t)
	cl := redistest.SharedCluster(t)
	ctx := context.Background()
	p := prefix()
	s := newStore(t, e, redisstore.Options{Prefix: p, Now: ratelimittest.NewClock(ratelimittest.T0).Now})
	for _, key := range []string{"together", "sl:gcra:60000ms:api_user_632be598c0ebccc7_", "{braces}x"} {
		for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog} {
			if _, err := s.Apply(ctx, ratelimit.Request{Key: key, Limit: ratelimit.PerMinute(5), Algorithm: alg, N: 1}); err != nil {
				t.Fatal(err)
			}
		}
		want, err := cl.NodeFor(readable(p, "t", key))
		if err != nil {
			t.Fatal(err)
		}
		m := s.MarkerKey(key)
		mv, err := e.client.Do(ctx, e.client.B().Get().Key(m).Build()).ToString()
		if err != nil {
			t.Fatalf("%q: no marker (the fixed window's charge did not go as plain commands): %v", key, err)
		}
		for _, name := range []string{s.Key(ratelimit.GCRA, key), s.Key(ratelimit.SlidingWindowLog, key), m, m + ":" + mv} {
			node, err := cl.NodeFor(name)
			if err != nil {
				t.Fatal(err)
			}
			if node != want {
				t.Errorf("%q: %q on %s, want %s (the readable name's node)", key, name, node.Addr, want.Addr)
			}
			if v, err := node.Do("EXISTS", name); err != nil || v != int64(1) {
				t.Errorf("%q: %q not on %s: %v, %v", key, name, node.Addr, v, err)
			}
		}
	}
}
