package redisstore_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// goroutines counts the goroutines whose stack (its functions, and the
// "created by" line) contains any of the strings.
func goroutines(any ...string) int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) {
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	count := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		for _, s := range any {
			if strings.Contains(g, s) {
				count++
				break
			}
		}
	}
	return count
}

// sweepers counts the goroutines of Prefetches: running the sweeper, or
// made by a Prefetch and not started yet (whose stack names only the
// wrapper the go statement made).
func sweepers() int {
	return goroutines("redisstore.(*Prefetch).sweep(",
		"created by github.com/sluicehq/sluice/redisstore.NewPrefetch",
		"created by github.com/sluicehq/sluice/redisstore.(*Prefetch)")
}

// watchdogs counts the goroutines running a store's watchdog.
func watchdogs() int { return goroutines("redisstore.(*batcher).watch(") }

// An idle store runs no watchdog: the first call queued starts it, and it
// returns at a tick that finds no call left.
func TestIdleStoreNoWatchdog(t *testing.T) {
	before := watchdogs()
	s := newStore(t, standalone(t), redisstore.Options{Timeout: 100 * time.Millisecond})
	if n := watchdogs() - before; n > 0 {
		t.Fatalf("idle store: %d watchdogs, want 0", n)
	}
	ctx := context.Background()
	for range 3 {
		calls := s.Stats().ScriptCalls
		if _, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(100), N: 1}); err != nil {
			t.Fatal(err)
		}
		if s.Stats().ScriptCalls == calls {
			t.Fatal("the call did not go through the batcher")
		}
		eventually(t, func() bool { return watchdogs()-before <= 0 }) // it ticks on the real clock
	}
}

// A Prefetch with nothing to prefetch (here: limits too small to slice, and
// peeks) runs no sweeper, so an idle server is not woken every TTL/2.
func TestPrefetchIdleNoSweeper(t *testing.T) {
	before := sweepers()
	s := newStore(t, standalone(t), redisstore.Options{})
	l := newPrefetch(t, s, redisstore.PrefetchOptions{})
	ctx := context.Background()
	for i := range 10 {
		req := ratelimit.Request{Key: "small", Limit: ratelimit.PerSecond(100), N: 1}
		if i%2 == 1 {
			req = ratelimit.Request{Key: "big", Limit: ratelimit.PerSecond(1000000), N: 0}
		}
		if _, err := l.Apply(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := sweepers() - before; n > 0 {
		t.Errorf("nothing prefetched: %d sweeper goroutines, want 0", n)
	}
	if st := l.Stats(); st.Keys != 0 || st.Exact != 10 {
		t.Errorf("stats %+v, want no key tracked and 10 exact decisions", st)
	}
}

// The sweeper starts with the first tracked key, gives back expired
// slices, drops idle keys, and returns when the table is empty; the next
// key starts it again, and Close stops it and gives back what is held.
func TestPrefetchSweeperFollowsKeys(t *testing.T) {
	before := sweepers()
	s := newStore(t, standalone(t), redisstore.Options{})
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	const ttl = 10 * time.Millisecond
	l := newPrefetch(t, s, redisstore.PrefetchOptions{TTL: ttl, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	ctx := context.Background()
	req := ratelimit.Request{Key: "hot", Limit: ratelimit.PerSecond(1000000), N: 1} // largest slice 1000
	if n := sweepers() - before; n > 0 {
		t.Fatalf("new Prefetch: %d sweepers, want 0", n)
	}
	hot := func() {
		t.Helper()
		for range 50 {
			if d, err := l.Apply(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
		}
	}
	hot()
	if st := l.Stats(); st.Keys != 1 || st.Takes == 0 {
		t.Fatalf("a hot key: %+v, want it tracked with a slice", st)
	}
	if n := sweepers() - before; n != 1 {
		t.Fatalf("a key tracked: %d sweepers, want 1", n)
	}
	// The slice expires: the sweeper gives it back.
	clock.Add(int64(2 * ttl))
	eventually(t, func() bool { return l.Stats().Returns == 1 }) // the sweeper ticks on the real clock
	// The key idles 10 TTLs: dropped, and the sweeper returns.
	clock.Add(int64(11 * ttl))
	eventually(t, func() bool { return l.Stats().Keys == 0 && sweepers()-before <= 0 })
	// The next key starts it again; Close stops it and gives back the slice.
	hot()
	if n := sweepers() - before; n != 1 {
		t.Fatalf("a key again: %d sweepers, want 1", n)
	}
	returns := l.Stats().Returns
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := sweepers() - before; n > 0 {
		t.Errorf("closed: %d sweepers, want 0", n)
	}
	if st := l.Stats(); st.Returns != returns+1 {
		t.Errorf("closed: %+v, want the slice in hand given back", st)
	}
}
