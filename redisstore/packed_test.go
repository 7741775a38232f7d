package redisstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

// nodeOf returns the server of e holding the Redis key k.
func nodeOf(t *testing.T, e env, k string) *redistest.Server {
	t.Helper()
	if e.name != "cluster" {
		return redistest.Shared(t)
	}
	n, err := redistest.SharedCluster(t).NodeFor(k)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func do(t *testing.T, n *redistest.Server, args ...string) any {
	t.Helper()
	v, err := n.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func apply(t *testing.T, s *redisstore.Store, req ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := s.Apply(context.Background(), req)
	if err != nil {
		t.Fatalf("%+v: %v", req, err)
	}
	return d
}

// TestPackedLayout checks where the packed layout keeps a bucket's state,
// with Redis's clock: a 12-byte field of a hash shared by the keys of one
// slot (one bucket a slot here), no string key, and the hash expiring at
// the latest of its fields' expiries, the first whole second at or after
// each TAT.
func TestPackedLayout(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		s := newStore(t, e, redisstore.Options{Layout: redisstore.LayoutPacked, PackedBuckets: 1})
		long := ratelimit.Limit{Rate: 1000, Period: time.Hour, Burst: 1000} // an interval below 2^32 ns: 12 bytes
		short := ratelimit.Limit{Rate: 10, Period: 3 * time.Second, Burst: 10}
		// The later expiry second: the hash's expiry moves.
		apply(t, s, ratelimit.Request{Key: "{p}short", Limit: short, N: 1, Algorithm: ratelimit.TokenBucket})
		apply(t, s, ratelimit.Request{Key: "{p}long", Limit: long, N: 3})
		h, f, ok := s.Field(ratelimit.GCRA, "{p}long")
		h2, f2, _ := s.Field(ratelimit.TokenBucket, "{p}short")
		if !ok || h != h2 || f == f2 || len(f) != 8 {
			t.Fatalf("fields %q %q of hashes %q %q: want 8-byte fields of one hash", f, f2, h, h2)
		}
		if _, _, ok := s.Field(ratelimit.SlidingWindowLog, "{p}long"); ok {
			t.Error("a sliding log's state is packed: want it under its string key")
		}
		n := nodeOf(t, e, h)
		if v := do(t, n, "EXISTS", s.Key(ratelimit.GCRA, "{p}long")); v != int64(0) {
			t.Error("the packed layout wrote a string key")
		}
		if v := do(t, n, "HLEN", h); v != int64(2) {
			t.Fatalf("HLEN %v, want 2", v)
		}
		var latest int64
		for _, field := range []string{f, f2} {
			b, _ := do(t, n, "HGET", h, field).(string)
			if len(b) != 12 {
				t.Fatalf("state %q, want 12 bytes", b)
			}
			sec, ns := int64(binary.LittleEndian.Uint32([]byte(b[:4]))), binary.LittleEndian.Uint32([]byte(b[8:]))
			if ns > 0 {
				sec++
			}
			latest = max(latest, sec)
		}
		if at := do(t, n, "PEXPIRETIME", h); at != latest*1000 {
			t.Errorf("the hash expires at %v ms, want %d000, its latest field's", at, latest)
		}
		if enc := do(t, n, "OBJECT", "ENCODING", h); enc != "listpack" {
			t.Errorf("encoding %v, want listpack", enc)
		}
		// A window's hash expires at the second its state names.
		apply(t, s, ratelimit.Request{Key: "{p}w", Limit: long, N: 1, Algorithm: ratelimit.FixedWindow})
		wh, wf, _ := s.Field(ratelimit.FixedWindow, "{p}w")
		b, _ := do(t, n, "HGET", wh, wf).(string)
		if len(b) != 28 {
			t.Fatalf("window state %q, want 28 bytes", b)
		}
		if exp, at := int64(binary.LittleEndian.Uint32([]byte(b[16:20]))), do(t, n, "PEXPIRETIME", wh); at != exp*1000 {
			t.Errorf("the window's hash expires at %v ms, want %d000, the second its state names", at, exp)
		}
	})
}

// TestPackedSweep fills one hash with states that decay, round after
// round of fresh keys, and checks that the hash stays bounded (its dead
// fields are swept) while a live field, the victim's, keeps its count,
// and so do the live fields of the last round.
func TestPackedSweep(t *testing.T) {
	e := standalone(t)
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.T0)
			s := newStore(t, e, redisstore.Options{Layout: redisstore.LayoutPacked, PackedBuckets: 1, Now: clock.Now})
			victim := ratelimit.Request{Key: "{s}victim", Limit: ratelimit.PerHour(3), N: 2, Algorithm: alg}
			apply(t, s, victim)
			h, _, _ := s.Field(alg, victim.Key)
			n := redistest.Shared(t)
			lim := ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 1}
			most := int64(0)
			for round := range 20 {
				for i := range 50 {
					apply(t, s, ratelimit.Request{Key: fmt.Sprintf("{s}%d-%d", round, i), Limit: lim, N: 1, Algorithm: alg})
					most = max(most, do(t, n, "HLEN", h).(int64))
				}
				if round < 19 {
					clock.Set(clock.Now().Add(3 * time.Second)) // this round's states decay
				}
			}
			if most > 128 {
				t.Errorf("the hash reached %d fields for 51 live states and 1000 written: want at most 128", most)
			}
			if enc := do(t, n, "OBJECT", "ENCODING", h); enc != "listpack" {
				t.Errorf("encoding %v, want listpack", enc)
			}
			victim.N = 0
			if d := apply(t, s, victim); d.Remaining != 1 {
				t.Errorf("the victim has %+v after the sweeps: want 1 remaining", d)
			}
			for i := range 50 {
				if d := apply(t, s, ratelimit.Request{Key: fmt.Sprintf("{s}19-%d", i), Limit: lim, Algorithm: alg}); d.Remaining != 0 {
					t.Fatalf("live key %d of the last round: %+v, want 0 remaining", i, d)
				}
			}
		})
	}
}

// TestPackedSweepAmortised writes 1,000 live states into one hash and
// counts the sweeps (HGETALL, in INFO commandstats): the mark doubles
// after each, so there are a few, not one per write past the threshold.
func TestPackedSweepAmortised(t *testing.T) {
	srv := redistest.Start(t)
	clock := ratelimittest.NewClock(ratelimittest.T0)
	s := newStore(t, env{client: ownClient(t, srv.Addr)}, redisstore.Options{Layout: redisstore.LayoutPacked, PackedBuckets: 1, Now: clock.Now})
	for i := range 1000 {
		apply(t, s, ratelimit.Request{Key: fmt.Sprintf("{a}%d", i), Limit: ratelimit.PerHour(3), N: 1})
	}
	h, _, _ := s.Field(ratelimit.GCRA, "{a}0")
	if n := do(t, srv, "HLEN", h); n != int64(1001) {
		t.Fatalf("HLEN %v, want the 1000 live states and the mark", n)
	}
	info, _ := do(t, srv, "INFO", "commandstats").(string)
	sweeps := 0
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_hgetall:calls="); ok {
			sweeps, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	if sweeps < 1 || sweeps > 8 {
		t.Errorf("%d sweeps for 1000 new fields past a threshold of 64: want a few (the mark doubles)", sweeps)
	}
}

// TestPackedReadsStringStates switches a store's layout from string to
// packed: the packed store reads (and moves) the states the string one
// wrote under compact names, a fixed window's plain-command marker and
// count too (a lone charge on an idle store); the other way round, counts
// start afresh.
func TestPackedReadsStringStates(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		clock := ratelimittest.NewClock(ratelimittest.T0)
		pfx := prefix()
		str := newStore(t, e, redisstore.Options{Prefix: pfx, Now: clock.Now})
		packed := newStore(t, e, redisstore.Options{Prefix: pfx, Now: clock.Now, Layout: redisstore.LayoutPacked})
		lim := ratelimit.Limit{Rate: 10, Period: time.Hour, Burst: 10}
		for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.LeakyBucket, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter} {
			key := "up-" + alg.String()
			apply(t, str, ratelimit.Request{Key: key, Limit: lim, Algorithm: alg, N: 4})
			n := nodeOf(t, e, str.Key(alg, key))
			if v := do(t, n, "EXISTS", str.MarkerKey(key)); alg == ratelimit.FixedWindow && v != int64(1) {
				t.Fatal("the string store's lone fixed-window charge left no marker: want it as plain commands")
			}
			if d := apply(t, packed, ratelimit.Request{Key: key, Limit: lim, Algorithm: alg, N: 1}); d.Remaining != 5 {
				t.Errorf("%v: the packed store after 4 in the string layout: %+v, want 5 remaining", alg, d)
			}
			if v := do(t, n, "EXISTS", str.Key(alg, key), str.MarkerKey(key)); v != int64(0) {
				t.Errorf("%v: %v string states still there after the packed store moved them", alg, v)
			}
			if d := apply(t, str, ratelimit.Request{Key: key, Limit: lim, Algorithm: alg}); d.Remaining != 10 {
				t.Errorf("%v: the string store sees %+v: want a full bucket (it does not read packed states)", alg, d)
			}
		}
	})
}

// TestPackedReset checks that Reset deletes a packed state, and only it.
func TestPackedReset(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		clock := ratelimittest.NewClock(ratelimittest.T0)
		s := newStore(t, e, redisstore.Options{Layout: redisstore.LayoutPacked, PackedBuckets: 1, Now: clock.Now})
		lim := ratelimit.Limit{Rate: 10, Period: time.Hour, Burst: 10}
		apply(t, s, ratelimit.Request{Key: "{r}a", Limit: lim, N: 3})
		apply(t, s, ratelimit.Request{Key: "{r}b", Limit: lim, N: 3})
		if err := s.Reset(context.Background(), "{r}a"); err != nil {
			t.Fatal(err)
		}
		if d := apply(t, s, ratelimit.Request{Key: "{r}a", Limit: lim}); d.Remaining != 10 {
			t.Errorf("after Reset: %+v, want 10 remaining", d)
		}
		if d := apply(t, s, ratelimit.Request{Key: "{r}b", Limit: lim}); d.Remaining != 7 {
			t.Errorf("the other key of the hash after Reset: %+v, want 7 remaining", d)
		}
	})
}

// TestPackedOptions checks the packed layout's option errors.
func TestPackedOptions(t *testing.T) {
	e := standalone(t)
	for _, o := range []redisstore.Options{{Layout: redisstore.LayoutPacked, PackedBuckets: 3}, {Layout: 7}, {PackedBuckets: 128}} {
		if _, err := redisstore.New(context.Background(), e.client, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := redisstore.ParseLayout("pakced"); err == nil {
		t.Error("ParseLayout(pakced): no error")
	}
}

// BenchmarkLayouts compares the string and packed layouts on GCRA and the
// fixed window, with 10,000 keys 31 to a slot (one hash a slot: the packed
// layout's hashes hold about 31 fields, as a million keys do by default),
// serial and with 64 callers, reporting redis-server's CPU time a
// decision.
func BenchmarkLayouts(b *testing.B) {
	e := standalone(b)
	lim := ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 1000}
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("{%d}%d", i%320, i)
	}
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		for _, l := range []redisstore.Layout{redisstore.LayoutString, redisstore.LayoutPacked} {
			o := redisstore.Options{Layout: l, PackedBuckets: 1}
			name := alg.String() + "/" + l.String()
			b.Run(name+"/serial", func(b *testing.B) {
				s := newStore(b, e, o)
				b.ReportAllocs()
				defer serverCost(b, e, s)()
				for i := 0; b.Loop(); i++ {
					if _, err := s.Apply(context.Background(), ratelimit.Request{Key: keys[i%len(keys)], Limit: lim, N: 1, Algorithm: alg}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/parallel64", func(b *testing.B) {
				s := newStore(b, e, o)
				b.ReportAllocs()
				b.SetParallelism(max(1, 64/runtimeProcs()))
				defer serverCost(b, e, s)()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
					for pb.Next() {
						if _, err := s.Apply(context.Background(), ratelimit.Request{Key: keys[rng.IntN(len(keys))], Limit: lim, N: 1, Algorithm: alg}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
