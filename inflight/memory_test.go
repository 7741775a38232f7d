package inflight_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
	"github.com/sluicehq/sluice/ratelimit"
)

var ctx = context.Background()

// TestMaxKeys: a full store refuses a new key with ErrFull (or applies
// OnFull) while every key has a live lease, frees the keys whose leases
// ended or expired, and never holds more than MaxKeys.
func TestMaxKeys(t *testing.T) {
	for _, p := range []ratelimit.FailurePolicy{ratelimit.FailError, ratelimit.FailAllow, ratelimit.FailDeny, ratelimit.FailLocal} {
		t.Run(p.String(), func(t *testing.T) {
			c := inflighttest.NewClock(inflighttest.Epoch)
			s := inflight.NewMemory(inflight.MemoryOptions{Now: c.Now, MaxKeys: 8, Shards: 1, OnFull: p})
			var leases []inflight.Lease
			for i := range 8 {
				l, d, err := s.Acquire(ctx, inflight.Request{Key: fmt.Sprint("k", i), Cap: 1, TTL: time.Second})
				if err != nil || !d.Allowed {
					t.Fatalf("key %d: %+v, %v", i, d, err)
				}
				leases = append(leases, l)
			}
			l, d, err := s.Acquire(ctx, inflight.Request{Key: "new", Cap: 1, TTL: time.Second})
			switch p {
			case ratelimit.FailError:
				if !errors.Is(err, inflight.ErrFull) {
					t.Errorf("full store: %+v, %v; want ErrFull", d, err)
				}
			case ratelimit.FailAllow, ratelimit.FailLocal:
				if err != nil || !d.Allowed || l.Held() {
					t.Errorf("full store: %+v, %+v, %v; want allowed with a lease that holds nothing", l, d, err)
				}
				if err := s.Release(ctx, l); err != nil {
					t.Error(err)
				}
			case ratelimit.FailDeny:
				if err != nil || d.Allowed {
					t.Errorf("full store: %+v, %v; want denied", d, err)
				}
			}
			if st := s.Stats(); st.Keys != 8 || st.MaxKeys != 8 || st.Refusals != 1 {
				t.Errorf("Stats = %+v, want 8 keys of 8, 1 refusal", st)
			}
			// A released key makes room.
			s.Release(ctx, leases[3])
			if _, d, err := s.Acquire(ctx, inflight.Request{Key: "new", Cap: 1, TTL: time.Second}); err != nil || !d.Allowed {
				t.Errorf("after a release: %+v, %v", d, err)
			}
			// Expired leases make room.
			c.Advance(time.Second)
			for i := range 8 {
				if _, d, err := s.Acquire(ctx, inflight.Request{Key: fmt.Sprint("fresh", i), Cap: 1, TTL: time.Second}); err != nil || !d.Allowed {
					t.Fatalf("fresh key %d after every lease expired: %+v, %v", i, d, err)
				}
			}
			if n := s.Len(); n > 8 {
				t.Errorf("Len = %d, want at most 8", n)
			}
		})
	}
}

// TestKeysAreFreed: a key whose leases all ended takes no room for long:
// after many keys come and go, the store holds at most the idle ring's.
func TestKeysAreFreed(t *testing.T) {
	s := inflight.NewMemory(inflight.MemoryOptions{Shards: 4})
	for i := range 10000 {
		l, _, err := s.Acquire(ctx, inflight.Request{Key: fmt.Sprint("user:", i), Cap: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.Release(ctx, l)
	}
	if n := s.Len(); n > 4*4 {
		t.Errorf("Len after 10000 keys came and went = %d, want at most 16 (4 idle keys a shard)", n)
	}
}

// TestMemoryBound: 2^18 keys with a lease each stay under 250 bytes a key
// (the keys' strings not counted).
func TestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 2^18 keys")
	}
	const n = 1 << 18
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("user:", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := inflight.NewMemory(inflight.MemoryOptions{MaxKeys: -1})
	for _, k := range keys {
		if _, d, err := s.Acquire(ctx, inflight.Request{Key: k, Cap: 10}); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v, %v", k, d, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d keys with one lease each: %.0f bytes a key (keys' strings not counted)", n, per)
	if per > 250 {
		t.Errorf("%.0f bytes a key, want at most 250", per)
	}
	runtime.KeepAlive(s)
}

func TestClosed(t *testing.T) {
	before := runtime.NumGoroutine()
	s := inflight.NewMemory(inflight.MemoryOptions{Resolution: time.Millisecond})
	defer func() {
		// Close stopped the cached clock's goroutine.
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines after Close, %d before NewMemory", runtime.NumGoroutine(), before)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	l, _, _ := s.Acquire(ctx, inflight.Request{Key: "k", Cap: 1})
	s.Close()
	s.Close()
	if _, _, err := s.Acquire(ctx, inflight.Request{Key: "k", Cap: 1}); !errors.Is(err, inflight.ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
	if err := s.Release(ctx, l); !errors.Is(err, inflight.ErrClosed) {
		t.Errorf("Release after Close: %v", err)
	}
	if _, err := s.Renew(ctx, l, 0); !errors.Is(err, inflight.ErrClosed) {
		t.Errorf("Renew after Close: %v", err)
	}
	if _, err := s.Peek(ctx, "k"); !errors.Is(err, inflight.ErrClosed) {
		t.Errorf("Peek after Close: %v", err)
	}
}

// TestManyLeasesOneKey: a key holding thousands of leases with distinct
// expiries reclaims them in expiry order, and reports the earliest.
func TestManyLeasesOneKey(t *testing.T) {
	c := inflighttest.NewClock(inflighttest.Epoch)
	s := inflight.NewMemory(inflight.MemoryOptions{Now: c.Now})
	const n = 5000
	var leases []inflight.Lease
	for i := range n {
		// Expiries in a scrambled order: i*7919 mod n seconds.
		ttl := time.Duration(1+(i*7919)%n) * time.Millisecond
		l, d, err := s.Acquire(ctx, inflight.Request{Key: "k", Cap: n, TTL: ttl})
		if err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		leases = append(leases, l)
	}
	// Release every third, renew every fifth far ahead.
	live := n
	for i, l := range leases {
		switch {
		case i%3 == 0:
			s.Release(ctx, l)
			live--
		case i%5 == 0:
			if _, err := s.Renew(ctx, l, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	renewed := 0
	for i := range leases {
		if i%3 != 0 && i%5 == 0 {
			renewed++
		}
	}
	if got, _ := s.Peek(ctx, "k"); got != int64(live) {
		t.Fatalf("Peek = %d, want %d", got, live)
	}
	// Walk the clock through every expiry in uneven steps.
	for ms := 1; ms <= n+97; ms += 97 {
		c.Advance(97 * time.Millisecond)
		got, _ := s.Peek(ctx, "k")
		// Leases expiring at or before ms are gone, except the renewed.
		want := int64(renewed)
		for i := range leases {
			if i%3 != 0 && i%5 != 0 && 1+(i*7919)%n > ms+96 {
				want++
			}
		}
		if got != want {
			t.Fatalf("at %d ms: Peek = %d, want %d", ms+96, got, want)
		}
	}
	_, d, _ := s.Acquire(ctx, inflight.Request{Key: "k", Cap: 1})
	if d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("over the cap: %+v", d)
	}
}

// TestResolution: with a cached clock, leases still expire (the clock
// moves), and Expiry is on that clock.
func TestResolution(t *testing.T) {
	s := inflight.NewMemory(inflight.MemoryOptions{Resolution: time.Millisecond})
	defer s.Close()
	req := inflight.Request{Key: "k", Cap: 1, TTL: 5 * time.Millisecond}
	l, _, _ := s.Acquire(ctx, req)
	if d := time.Until(l.Expiry); d > 5*time.Millisecond || d < -time.Second {
		t.Errorf("expiry %v from now, want about 5 ms", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, d, err := s.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never expired on the cached clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStaleLeaseOnRecycledRecord: a key's record, freed, serves another
// key; a stale lease of the first key (released twice, or expired and
// released late), which still points at the record, frees nothing of the
// new key's, and cannot be renewed.
func TestStaleLeaseOnRecycledRecord(t *testing.T) {
	c := inflighttest.NewClock(inflighttest.Epoch)
	s := inflight.NewMemory(inflight.MemoryOptions{Now: c.Now, Shards: 1, MaxKeys: -1})
	stale, _, _ := s.Acquire(ctx, inflight.Request{Key: "a", Cap: 1, TTL: time.Second})
	s.Release(ctx, stale)
	// An expired, unreleased lease.
	expired, _, _ := s.Acquire(ctx, inflight.Request{Key: "b", Cap: 1, TTL: time.Second})
	c.Advance(2 * time.Second)
	for i := range 20 {
		// Keys come and go, pushing older idle keys out of the ring and
		// their records to the spares, where held keys pick them up
		// (TestRecordsAreRecycled checks that this happens).
		for j := range 2 + i%4 {
			l, _, _ := s.Acquire(ctx, inflight.Request{Key: fmt.Sprint("churn", i, ".", j), Cap: 1})
			s.Release(ctx, l)
		}
		key := fmt.Sprint("x", i)
		l, d, err := s.Acquire(ctx, inflight.Request{Key: key, Cap: 1, TTL: time.Minute})
		if err != nil || !d.Allowed {
			t.Fatalf("%s: %+v, %v", key, d, err)
		}
		s.Release(ctx, stale)
		s.Release(ctx, expired)
		if n, _ := s.Peek(ctx, key); n != 1 {
			t.Fatalf("%s: Peek after stale releases = %d, want 1 (a stale lease freed its slot)", key, n)
		}
		if _, err := s.Renew(ctx, stale, time.Minute); !errors.Is(err, inflight.ErrExpired) {
			t.Fatalf("Renew(stale) = %v, want ErrExpired", err)
		}
		_ = l // held to the end: the records stay in use
	}
	if s.Len() < 20 {
		t.Errorf("Len = %d, want at least the 20 held keys", s.Len())
	}
}

// TestMaxKeysSmall: a bound smaller than the default shard count still
// holds exactly.
func TestMaxKeysSmall(t *testing.T) {
	for _, maxKeys := range []int{1, 5, 8, 100, 1000} {
		s := inflight.NewMemory(inflight.MemoryOptions{MaxKeys: maxKeys})
		held := 0
		for i := range 4 * maxKeys {
			_, d, err := s.Acquire(ctx, inflight.Request{Key: fmt.Sprint("k", i), Cap: 1})
			if err == nil && d.Allowed {
				held++
			}
		}
		if held > maxKeys || s.Len() > maxKeys {
			t.Errorf("MaxKeys %d: %d keys admitted, Len %d", maxKeys, held, s.Len())
		}
		if held < maxKeys/2 {
			t.Errorf("MaxKeys %d: only %d keys admitted", maxKeys, held)
		}
	}
}

// TestConcurrentChurn: goroutines enter and leave 50 keys of cap 2 on one
// shard, so keys are freed and their records recycled between keys all
// the time, while leases are held: never more than the cap held on a key,
// and at the end no lease left and at most the idle ring's keys.
func TestConcurrentChurn(t *testing.T) {
	const keys, capacity, workers = 50, 2, 8
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	s := inflight.NewMemory(inflight.MemoryOptions{Shards: 1, MaxKeys: -1})
	var held [keys]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				k := r.IntN(keys)
				l, d, err := s.Acquire(ctx, inflight.Request{Key: fmt.Sprint("k", k), Cap: capacity})
				if err != nil {
					errs <- err
					return
				}
				if !d.Allowed {
					continue
				}
				if h := held[k].Add(1); h > capacity {
					errs <- fmt.Errorf("key %d: %d held, cap %d", k, h, capacity)
					return
				}
				held[k].Add(-1)
				s.Release(ctx, l)
				if r.IntN(4) == 0 {
					s.Release(ctx, l) // a double release frees nothing
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		if n, _ := s.Peek(ctx, fmt.Sprint("k", k)); n != 0 {
			t.Errorf("key %d: %d in flight after every release", k, n)
		}
	}
	if n := s.Len(); n > 4 {
		t.Errorf("Len = %d after every release, want at most the 4 idle keys", n)
	}
}
