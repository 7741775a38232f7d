package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// floodRules are what every caller of the flood tests is limited by: an
// hourly fixed window, an hourly GCRA and token bucket, and a monthly quota
// (a fixed window of 30 days).
var floodRules = []struct {
	name string
	alg  ratelimit.Algorithm
	lim  ratelimit.Limit
}{
	{"hourly", ratelimit.FixedWindow, ratelimit.Limit{Rate: 100, Period: time.Hour}},
	{"gcra", ratelimit.GCRA, ratelimit.Limit{Rate: 10, Period: time.Hour, Burst: 10}},
	{"bucket", ratelimit.TokenBucket, ratelimit.Limit{Rate: 20, Period: time.Hour}},
	{"monthly", ratelimit.FixedWindow, ratelimit.Limit{Rate: 1000, Period: 30 * 24 * time.Hour}},
}

// floodStart is 10 days and 5 minutes into a monthly window (fixed windows
// are aligned to the Unix epoch), so the flood's ten virtual minutes stay
// within one hourly and one monthly window.
func floodStart() time.Time {
	month := int64(30 * 24 * time.Hour)
	t0 := ratelimittest.T0.UnixNano()
	return time.Unix(0, t0-t0%month).Add(10*24*time.Hour + 5*time.Minute)
}

// testFlood puts 200 victims' exhausted hourly limits and half-used
// monthly quotas in a store of maxKeys keys, floods it with one request on
// every rule from each of identities fresh identities over ten virtual
// minutes, and checks that no victim's state was forgotten: each answers a
// peek exactly as a store that never evicted does. It also checks the
// store's bound on keys and on heap (memstore.MaxBytesPerKey a key) and
// its counters.
func testFlood(t *testing.T, maxKeys, identities int) {
	ctx := context.Background()
	start := floodStart()
	clock := ratelimittest.NewClock(start)
	heapBefore := heapAlloc()
	s := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: maxKeys, SweepInterval: -1})
	defer s.Close()
	ref := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: -1, SweepInterval: -1})
	defer ref.Close()

	const victims = 200
	key := func(who string, i int, rule string) string { return who + ":" + strconv.Itoa(i) + "|" + rule }
	for i := range victims {
		for _, r := range floodRules {
			req := ratelimit.Request{Key: key("victim", i, r.name), Limit: r.lim, Algorithm: r.alg, N: 1}
			n := r.lim.Capacity(r.alg) // exhausted…
			if r.name == "monthly" {
				n = r.lim.Rate / 2 // …or half used
			}
			for _, st := range []ratelimit.Store{s, ref} {
				for range n {
					if d, err := st.Apply(ctx, req); err != nil || !d.Allowed {
						t.Fatalf("victim %d %s: %+v, %v", i, r.name, d, err)
					}
				}
			}
		}
	}
	minutes := 10 * time.Minute
	for i := range identities {
		clock.Set(start.Add(time.Duration(int64(minutes) * int64(i) / int64(identities))))
		for _, r := range floodRules {
			d, err := s.Apply(ctx, ratelimit.Request{Key: key("flood", i, r.name), Limit: r.lim, Algorithm: r.alg, N: 1})
			if err != nil || !d.Allowed {
				t.Fatalf("flood identity %d %s: %+v, %v", i, r.name, d, err)
			}
		}
	}
	clock.Set(start.Add(minutes))

	reset := map[string]int{}
	for i := range victims {
		for _, r := range floodRules {
			req := ratelimit.Request{Key: key("victim", i, r.name), Limit: r.lim, Algorithm: r.alg} // a peek
			got, err := s.Apply(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := ref.Apply(ctx, req)
			if got != want {
				if reset[r.name]++; reset[r.name] <= 3 {
					t.Errorf("victim %d %s after the flood: %+v, want %+v as in a store that never evicted", i, r.name, got, want)
				}
			}
		}
	}
	for name, n := range reset {
		t.Errorf("%d of %d victims' %s state forgotten", n, victims, name)
	}

	st := s.Stats()
	if st.Keys > maxKeys || st.Keys != s.Len() || st.MaxKeys != maxKeys {
		t.Errorf("Stats = %+v, Len %d: want Keys = Len ≤ MaxKeys = %d", st, s.Len(), maxKeys)
	}
	// Every key past the bound took a slot: evicted, or reclaimed after
	// it decayed (the flood's GCRA keys decay six minutes after their
	// request). None was refused: the flood's own keys are cheap.
	if st.Refusals != 0 || st.Evictions == 0 {
		t.Errorf("Stats = %+v: want evictions and no refusals", st)
	}
	heapAfter := heapAlloc()
	runtime.KeepAlive(s)
	perKey := float64(int64(heapAfter)-int64(heapBefore)) / float64(maxKeys)
	t.Logf("%d identities × %d rules past %d keys: %+v; heap %.1f bytes a key of MaxKeys", identities, len(floodRules), maxKeys, st, perKey)
	if perKey > memstore.MaxBytesPerKey {
		t.Errorf("heap grew by %.1f bytes a key of MaxKeys, want at most MaxBytesPerKey = %d", perKey, memstore.MaxBytesPerKey)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestFloodKeepsValuableState is testFlood at a scale the race detector
// runs in seconds: 2^16 keys, 2^17 fresh identities (four keys each).
func TestFloodKeepsValuableState(t *testing.T) {
	testFlood(t, 1<<16, 1<<17)
}

// TestFloodFullScale is testFlood at the default MaxKeys, 2^20, flooded by
// two million fresh identities (eight million new keys).
func TestFloodFullScale(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("eight million new keys: run without -short and -race")
	}
	testFlood(t, memstore.DefaultMaxKeys, 2_000_000)
}

// TestFullRefusesNewKeys fills a store with denials (every key exhausted)
// and checks that a new key is refused with ErrFull, through Apply and a
// bound Limiter, for every algorithm, rather than let it push a denial out;
// that the refusals are counted; that the held keys are still decided;
// and that once they decay new keys are admitted again.
func TestFullRefusesNewKeys(t *testing.T) {
	ctx := context.Background()
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.T0)
			s := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: 64, Shards: 1, SweepInterval: -1})
			defer s.Close()
			lim := ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 1}
			for i := range 64 {
				if d, err := s.Apply(ctx, ratelimit.Request{Key: "held-" + strconv.Itoa(i), Limit: lim, Algorithm: alg, N: 1}); err != nil || !d.Allowed {
					t.Fatalf("key %d: %+v, %v", i, d, err)
				}
			}
			d, err := s.Apply(ctx, ratelimit.Request{Key: "new", Limit: lim, Algorithm: alg, N: 1})
			if !errors.Is(err, memstore.ErrFull) || d != (ratelimit.Decision{}) {
				t.Fatalf("new key in a store full of denials: %+v, %v; want ErrFull", d, err)
			}
			l, err := ratelimit.NewLimiter(s, alg, lim)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Allow(ctx, "new too"); !errors.Is(err, memstore.ErrFull) {
				t.Fatalf("bound limiter, new key: %v; want ErrFull", err)
			}
			// A peek adds no key, so it is answered.
			if d, err := s.Apply(ctx, ratelimit.Request{Key: "new", Limit: lim, Algorithm: alg}); err != nil || !d.Allowed || d.Remaining != 1 {
				t.Errorf("peek at a new key: %+v, %v", d, err)
			}
			for i := range 64 {
				if d, err := s.Apply(ctx, ratelimit.Request{Key: "held-" + strconv.Itoa(i), Limit: lim, Algorithm: alg, N: 1}); err != nil || d.Allowed {
					t.Fatalf("held key %d: %+v, %v; want still denied", i, d, err)
				}
			}
			if st := s.Stats(); st != (memstore.Stats{Keys: 64, MaxKeys: 64, Evictions: 0, Refusals: 2}) {
				t.Errorf("Stats = %+v, want 64 keys and 2 refusals", st)
			}
			// Two minutes on, every held key is back to full: the new
			// key takes a decayed one's place, which is no eviction.
			clock.Set(ratelimittest.T0.Add(2 * time.Minute))
			if d, err := s.Apply(ctx, ratelimit.Request{Key: "new", Limit: lim, Algorithm: alg, N: 1}); err != nil || !d.Allowed {
				t.Errorf("new key after the held ones decayed: %+v, %v", d, err)
			}
			if st := s.Stats(); st.Evictions != 0 || st.Refusals != 2 || st.Keys != 64 {
				t.Errorf("Stats = %+v, want 64 keys, no evictions, 2 refusals", st)
			}
		})
	}
}

// TestEvictsCheapestFirst holds 16 keys in one shard (so makeRoom's
// sample sees them all) at different shares of their limits and adds new
// keys one at a time: each must push out the key whose loss costs least,
// and never one that denies.
func TestEvictsCheapestFirst(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(ratelimittest.T0)
	s := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: 16, Shards: 1, SweepInterval: -1})
	defer s.Close()
	// Per-minute limits (short-lived state): key i has used i+1 of 20,
	// through a bucket for even i and a fixed window for odd i; key 15
	// has used all 20 and denies.
	lim := ratelimit.Limit{Rate: 20, Period: time.Minute}
	alg := func(i int) ratelimit.Algorithm {
		if i%2 == 0 {
			return ratelimit.TokenBucket
		}
		return ratelimit.FixedWindow
	}
	used := func(i int) int64 {
		if i == 15 {
			return 20
		}
		return int64(i + 1)
	}
	for i := range 16 {
		if d, err := s.Apply(ctx, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Algorithm: alg(i), N: used(i)}); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v, %v", i, d, err)
		}
	}
	for n := range 15 {
		// A new key that denies at once (all of its limit used): it is
		// the most valuable, so the next new key cannot push it out.
		if d, err := s.Apply(ctx, ratelimit.Request{Key: "new" + strconv.Itoa(n), Limit: lim, Algorithm: ratelimit.GCRA, N: 20}); err != nil || !d.Allowed {
			t.Fatalf("new key %d: %+v, %v", n, d, err)
		}
		for i := range 16 {
			d, _ := s.Apply(ctx, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Algorithm: alg(i)})
			if gone := d.Remaining == 20; gone != (i <= n) {
				t.Fatalf("after %d new keys, key %d (used %d of 20) has %d left: want the %d least used gone", n+1, i, used(i), d.Remaining, n+1)
			}
		}
	}
	if _, err := s.Apply(ctx, ratelimit.Request{Key: "one too many", Limit: lim, N: 1}); !errors.Is(err, memstore.ErrFull) {
		t.Errorf("new key in a store of 16 denials: %v, want ErrFull", err)
	}
	if st := s.Stats(); st.Evictions != 15 || st.Refusals != 1 {
		t.Errorf("Stats = %+v, want 15 evictions and 1 refusal", st)
	}
}

// TestLongQuotaOutranksShortState checks the other kind of valuable state:
// a monthly quota used past a quarter is kept while short-period keys go,
// even those more used; one used below a quarter is ranked by its share.
func TestLongQuotaOutranksShortState(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(floodStart())
	s := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: 4, Shards: 1, SweepInterval: -1})
	defer s.Close()
	monthly := ratelimit.Limit{Rate: 1000, Period: 30 * 24 * time.Hour}
	minute := ratelimit.Limit{Rate: 10, Period: time.Minute}
	apply := func(key string, lim ratelimit.Limit, n int64) error {
		_, err := s.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: n})
		return err
	}
	for _, k := range []struct {
		key string
		lim ratelimit.Limit
		n   int64
	}{{"month-300", monthly, 300}, {"month-10", monthly, 10}, {"minute-9", minute, 9}, {"minute-8", minute, 8}} {
		if err := apply(k.key, k.lim, k.n); err != nil {
			t.Fatal(err)
		}
	}
	remaining := func(key string, lim ratelimit.Limit) int64 {
		d, _ := s.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.FixedWindow})
		return d.Remaining
	}
	// The cheapest is the monthly quota used 1% (10 of 1000), then the
	// minute windows (80%, 90%); the one used 30% is never pushed out.
	for i, gone := range []string{"month-10", "minute-8", "minute-9"} {
		if err := apply("new"+strconv.Itoa(i), monthly, 500); err != nil {
			t.Fatal(err)
		}
		lim := minute
		if gone == "month-10" {
			lim = monthly
		}
		if r := remaining(gone, lim); r != lim.Rate {
			t.Errorf("new key %d: %s has %d left, want it evicted", i, gone, r)
		}
		if r := remaining("month-300", monthly); r != 700 {
			t.Fatalf("new key %d: the quota used 30%% has %d left, want 700", i, r)
		}
	}
	if err := apply("new3", minute, 1); !errors.Is(err, memstore.ErrFull) {
		t.Errorf("new key in a store of used monthly quotas: %v, want ErrFull", err)
	}
}

// TestRestoreKeepsWhatEvictionNeeds snapshots a full store of keys of
// every algorithm at different shares of their limits and restores it:
// the restored store still knows their limits, so a new key pushes out
// the cheapest (it would refuse it if the limits were lost), and a store
// restored with a smaller MaxKeys keeps to it.
func TestRestoreKeepsWhatEvictionNeeds(t *testing.T) {
	ctx := context.Background()
	clock := ratelimittest.NewClock(ratelimittest.T0)
	// 12 keys, fewer than eviction's sample of 16: it compares them all,
	// so which go is certain (with more, a sample may miss a cheap one).
	opts := memstore.Options{Now: clock.Now, MaxKeys: 12, Shards: 1, SweepInterval: -1}
	a := memstore.New(opts)
	defer a.Close()
	lim := ratelimit.Limit{Rate: 10, Period: time.Minute}
	for i := range 12 {
		alg := ratelimit.Algorithms()[i%6]
		if _, err := a.Apply(ctx, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Algorithm: alg, N: int64(2 + i/6*3)}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := a.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()

	b := memstore.New(opts)
	defer b.Close()
	if err := b.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		// 4 of 10: more than the cheapest restored keys, less than the rest.
		if d, err := b.Apply(ctx, ratelimit.Request{Key: "new" + strconv.Itoa(i), Limit: lim, N: 4}); err != nil || !d.Allowed {
			t.Fatalf("new key %d in the restored store: %+v, %v", i, d, err)
		}
	}
	// The six keys that used 2 of 10 went; those that used 5 stay.
	for i := range 12 {
		alg := ratelimit.Algorithms()[i%6]
		d, _ := b.Apply(ctx, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Algorithm: alg})
		if want := int64(10 - 2 - i/6*3); i < 6 && d.Remaining != 10 || i >= 6 && d.Remaining != want {
			t.Errorf("key %d (%v) after the restore and 6 new keys: %d left", i, alg, d.Remaining)
		}
	}
	if st := b.Stats(); st.Evictions != 6 || st.Refusals != 0 {
		t.Errorf("Stats = %+v, want 6 evictions", st)
	}

	small := opts
	small.MaxKeys = 6
	c := memstore.New(small)
	defer c.Close()
	if err := c.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 6 {
		t.Errorf("restored into a store of 6 keys: Len = %d", n)
	}
}

// TestHeapBoundAcrossKinds fills a store past its bound with each kind of
// key in turn (fixed windows, then sliding logs, then GCRA), so that every
// shard's maps and table reach their peak, and checks the heap against
// MaxBytesPerKey: the worst case the bound covers.
func TestHeapBoundAcrossKinds(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million new keys: run without -short and -race")
	}
	ctx := context.Background()
	clock := ratelimittest.NewClock(ratelimittest.T0)
	const maxKeys = 1 << 16
	before := heapAlloc()
	s := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: maxKeys, SweepInterval: -1})
	defer s.Close()
	lim := ratelimit.Limit{Rate: 1000, Period: time.Minute}
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowLog, ratelimit.GCRA} {
		for i := range 4 * maxKeys {
			if _, err := s.Apply(ctx, ratelimit.Request{Key: alg.String() + strconv.Itoa(i), Limit: lim, Algorithm: alg, N: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := heapAlloc()
	runtime.KeepAlive(s)
	perKey := float64(int64(after)-int64(before)) / maxKeys
	t.Logf("%.1f bytes a key of MaxKeys; %+v", perKey, s.Stats())
	if perKey > memstore.MaxBytesPerKey {
		t.Errorf("heap grew by %.1f bytes a key of MaxKeys, want at most MaxBytesPerKey = %d", perKey, memstore.MaxBytesPerKey)
	}
}
