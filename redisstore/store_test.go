package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Shared(t)
	cl := redistest.SharedCluster(t)
	secret := redistest.Start(t)
	if _, err := secret.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url string
		db        int // when set, the key must be in this db of srv
	}{
		{"standalone", "redis://" + srv.Addr, 0},
		{"db", "redis://" + srv.Addr + "/3", 3},
		{"password", "redis://:s3cret@" + secret.Addr, 0},
		{"cluster", cl.URL(), 0},
		{"cluster one seed", "redis-cluster://" + cl.Nodes[1].Addr, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redisstore.Open(ctx, tc.url, redisstore.Options{Prefix: prefix(), Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 3 {
				d, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(2), N: 1})
				if err != nil || d.Allowed != (i < 2) {
					t.Fatalf("call %d: %+v, %v; want allowed only for the first 2", i, d, err)
				}
			}
			if tc.db != 0 {
				k := s.Key(ratelimit.GCRA, "k")
				in3, err3 := srv.DoDB(tc.db, "EXISTS", k)
				in0, err0 := srv.Do("EXISTS", k)
				if err3 != nil || err0 != nil || in3 != int64(1) || in0 != int64(0) {
					t.Fatalf("EXISTS in db %d = %v, %v; in db 0 = %v, %v; want 1 and 0", tc.db, in3, err3, in0, err0)
				}
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	secret := redistest.Start(t)
	if _, err := secret.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
		t.Fatal(err)
	}
	dead := redistest.Start(t)
	dead.Kill()
	for _, tc := range []struct{ name, url, want string }{
		{"scheme", "http://localhost:6379", "want redis://"},
		{"no host", "redis-cluster://", "no host"},
		{"refused, required at start", "redis://" + dead.Addr, "redis unavailable"},
		{"wrong password", "redis://:nope@" + secret.Addr, "redis unavailable"},
		{"wrong user", "redis://someone:nope@" + secret.Addr, "redis unavailable"},
		{"no such db", "redis://" + secret.Addr + "/99999", "redis unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only a refused connection depends on RequireAtStart: the
			// others are errors the server replies.
			s, err := redisstore.Open(ctx, tc.url, redisstore.Options{RequireAtStart: strings.HasPrefix(tc.name, "refused")})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q): no error", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) = %v, want an error containing %q", tc.url, err, tc.want)
			}
			if strings.Contains(err.Error(), "nope") {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
	if _, err := redisstore.New(ctx, nil, redisstore.Options{}); err == nil {
		t.Error("New(nil client): no error")
	}
	e := standalone(t)
	if _, err := redisstore.New(ctx, e.client, redisstore.Options{Prefix: "a{b}"}); err == nil {
		t.Error("New with a braced prefix: no error")
	}
}

// TestBatchSameKey sends many concurrent requests for one key, so that
// batches hold the key several times: exactly the capacity is admitted.
func TestBatchSameKey(t *testing.T) {
	layouts(t, func(t *testing.T, e env) {
		for _, alg := range ratelimit.Algorithms() {
			if packedSkips(e, alg) {
				continue
			}
			t.Run(alg.String(), func(t *testing.T) {
				now := ratelimittest.T0
				s := newStore(t, e, redisstore.Options{Now: fixedClock(now), Pipeline: 2})
				lim := ratelimit.Limit{Rate: 100, Period: time.Hour, Burst: 100}
				if got := ratelimittest.Hammer(t, s, ratelimit.Request{Key: "k", Limit: lim, Algorithm: alg, N: 1}, 32, 10); got != 100 {
					t.Errorf("admitted %d of 320, want exactly 100", got)
				}
			})
		}
	})
}

func TestDenyCache(t *testing.T) {
	srv := redistest.Start(t)
	now := ratelimittest.T0
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	s := newStore(t, env{client: ownClient(t, srv.Addr)}, redisstore.Options{Now: clock, DenyCache: true, Timeout: time.Second})
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 2}
	req := ratelimit.Request{Key: "k", Limit: lim, N: 1}
	for i := range 2 {
		if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("call %d: %+v, %v", i, d, err)
		}
	}
	denied, err := s.Apply(ctx, req)
	if err != nil || denied.Allowed || denied.RetryAfter != time.Second {
		t.Fatalf("third call: %+v, %v; want denied for 1s", denied, err)
	}
	// Redis gone: the cached denial still answers, without an error, until
	// RetryAfter has passed.
	srv.Kill()
	set(ratelimittest.T0.Add(400 * time.Millisecond))
	d, err := s.Apply(ctx, req)
	if err != nil || d.Allowed || d.RetryAfter != 600*time.Millisecond {
		t.Fatalf("cached: %+v, %v; want denied, RetryAfter 600ms", d, err)
	}
	// A bigger cost is denied too; a smaller one (a peek) is not cached.
	if d, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: lim, N: 2}); err != nil || d.Allowed {
		t.Fatalf("cached, cost 2: %+v, %v; want denied", d, err)
	}
	if _, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: lim, N: 0}); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("peek with Redis down: err = %v, want ErrUnavailable (peeks are not cached)", err)
	}
	// Once RetryAfter has passed, the request goes to Redis again.
	set(ratelimittest.T0.Add(time.Second))
	if _, err := s.Apply(ctx, req); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("after RetryAfter with Redis down: err = %v, want ErrUnavailable", err)
	}
}

func TestClosed(t *testing.T) {
	e := standalone(t)
	s := newStore(t, e, redisstore.Options{})
	s.Close()
	s.Close()
	if _, err := s.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), N: 1}); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("Apply after Close: err = %v, want ErrClosed", err)
	}
}

func TestContextCancelled(t *testing.T) {
	e := standalone(t)
	s := newStore(t, e, redisstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), N: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context: err = %v, want context.Canceled", err)
	}
	// Nothing was sent: the key is still untouched.
	if v, err := redistest.Shared(t).Do("EXISTS", s.Key(ratelimit.GCRA, "k")); err != nil || v != int64(0) {
		t.Fatalf("EXISTS = %v, %v; want 0", v, err)
	}
}

// TestServerClock checks the default clock (Redis TIME) end to end, and
// that state expires: an idle key's Redis key vanishes.
func TestServerClock(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		s := newStore(t, e, redisstore.Options{})
		ctx := context.Background()
		lim := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
		for _, alg := range ratelimit.Algorithms() {
			req := ratelimit.Request{Key: "clock-" + alg.String(), Limit: lim, Algorithm: alg, N: 1}
			d, err := s.Apply(ctx, req)
			if err != nil || !d.Allowed {
				t.Fatalf("%v: first: %+v, %v", alg, d, err)
			}
			d, err = s.Apply(ctx, req)
			if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 2*lim.Period {
				t.Fatalf("%v: second: %+v, %v; want denied for at most 2 periods", alg, d, err)
			}
		}
		// The keys expire on Redis's clock once their state has decayed.
		short := ratelimit.Limit{Rate: 1, Period: 50 * time.Millisecond, Burst: 1}
		if _, err := s.Apply(ctx, ratelimit.Request{Key: "expiry", Limit: short, N: 1}); err != nil {
			t.Fatal(err)
		}
		node := redistest.Shared(t)
		if e.name == "cluster" {
			var err error
			if node, err = redistest.SharedCluster(t).NodeFor(s.Key(ratelimit.GCRA, "expiry")); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, err := node.Do("EXISTS", s.Key(ratelimit.GCRA, "expiry"))
			if err != nil {
				t.Fatal(err)
			}
			if v == int64(0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("GCRA key still in Redis 10s after its state decayed")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestCloseStopsGoroutines checks that Close stops every goroutine the
// store started (its workers and its watchdog).
func TestCloseStopsGoroutines(t *testing.T) {
	e := standalone(t)
	ctx := context.Background()
	// Warm the shared client up, so its own goroutines are already there.
	warm := newStore(t, e, redisstore.Options{})
	if _, err := warm.Apply(ctx, ratelimit.Request{Key: "warm", Limit: ratelimit.PerSecond(1), N: 1}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	s, err := redisstore.New(ctx, e.client, redisstore.Options{Prefix: prefix(), Pipeline: 8, OnError: ratelimit.FailLocal, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), N: 1}); err != nil {
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine(); n <= before {
		t.Fatalf("%d goroutines with a store, %d without: the store started none?", n, before)
	}
	s.Close()
	// Goroutines that Close told to stop may take a moment to be gone, and
	// the shared client's own come and go: poll, boundedly.
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if n > before {
		t.Fatalf("%d goroutines after Close, %d before New", n, before)
	}
}

// TestServerClockExpiry checks what gcra.lua relies on to skip most expiry
// updates (KEEPTTL): with Redis's clock, a bucket key always expires at the
// first whole second at or after its TAT, never before it, also when a
// batch holds the key many times and the TAT crosses seconds.
func TestServerClockExpiry(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		s := newStore(t, e, redisstore.Options{})
		ctx := context.Background()
		// Each admitted request moves the TAT 300 ms: ten cross three
		// seconds.
		lim := ratelimit.Limit{Rate: 10, Period: 3 * time.Second, Burst: 10}
		node := redistest.Shared(t)
		if e.name == "cluster" {
			var err error
			if node, err = redistest.SharedCluster(t).NodeFor(s.Key(ratelimit.GCRA, "exp")); err != nil {
				t.Fatal(err)
			}
		}
		check := func(when string) {
			t.Helper()
			v, err := node.Do("GET", s.Key(ratelimit.GCRA, "exp"))
			if err != nil {
				t.Fatal(err)
			}
			b, ok := v.(string)
			if !ok || len(b) != 12 {
				t.Fatalf("%s: state %q, want 12 bytes (seconds, interval, nanoseconds)", when, v)
			}
			sec := int64(binary.LittleEndian.Uint32([]byte(b[:4])))
			ns := int64(binary.LittleEndian.Uint32([]byte(b[8:12])))
			want := sec
			if ns > 0 {
				want++
			}
			at, err := node.Do("PEXPIRETIME", s.Key(ratelimit.GCRA, "exp"))
			if err != nil {
				t.Fatal(err)
			}
			if at != want*1000 {
				t.Fatalf("%s: TAT %d.%09d expires at %v ms, want %d000", when, sec, ns, at, want)
			}
		}
		req := ratelimit.Request{Key: "exp", Limit: lim, Algorithm: ratelimit.GCRA, N: 1}
		for i := range 12 {
			if _, err := s.Apply(ctx, req); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("serial request %d", i))
		}
		// Concurrent: batches hold the key many times.
		if _, err := node.Do("DEL", s.Key(ratelimit.GCRA, "exp")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n := ratelimittest.Hammer(t, s, req, 32, 4)
		refilled := int64(time.Since(start) / (300 * time.Millisecond))
		check("after concurrent requests")
		if n < 10 || n > 11+refilled {
			t.Errorf("admitted %d of 128, want the burst of 10 and at most the %d refilled meanwhile", n, refilled+1)
		}
	})
}

// TestServerClockWindowExpiry checks what window.lua relies on to skip most
// expiry updates (KEEPTTL): with Redis's clock, a window key expires at the
// whole second its state names, the first at or after the state's
// window.State.Expiry, also across windows, in batches that hold the key
// many times, and when limits of other periods share the key. The fixed
// window's one key is written at once (CompatWindow -1; the marker form of
// the compatibility window: TestCompatWindow).
func TestServerClockWindowExpiry(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		p := prefix()
		s := newStore(t, e, redisstore.Options{Prefix: p, CompatWindow: -1})
		ctx := context.Background()
		fixed := ratelimit.Limit{Rate: 1000, Period: 700 * time.Millisecond}
		sliding := ratelimit.Limit{Rate: 1000, Period: 1300 * time.Millisecond}
		for _, tc := range []struct {
			name string
			reqs []ratelimit.Request
		}{
			{"fixed", []ratelimit.Request{{Limit: fixed, Algorithm: ratelimit.FixedWindow, N: 1}}},
			{"sliding", []ratelimit.Request{{Limit: sliding, Algorithm: ratelimit.SlidingWindowCounter, N: 1}}},
			{"mixed", []ratelimit.Request{
				{Limit: fixed, Algorithm: ratelimit.FixedWindow, N: 1},
				{Limit: sliding, Algorithm: ratelimit.SlidingWindowCounter, N: 1},
			}},
		} {
			key := "wexp-" + tc.name
			rkey := s.Key(ratelimit.FixedWindow, key)
			node := redistest.Shared(t)
			if e.name == "cluster" {
				var err error
				if node, err = redistest.SharedCluster(t).NodeFor(rkey); err != nil {
					t.Fatal(err)
				}
			}
			mkey := s.MarkerKey(key)
			check := func(when string, last ratelimit.Request) {
				t.Helper()
				v, err := node.Do("GET", rkey)
				if err != nil {
					t.Fatal(err)
				}
				if last.Algorithm == ratelimit.FixedWindow {
					// A whole-millisecond fixed window on Redis's clock: an
					// integer count in the key, expiring at its window's
					// end.
					checkIntegerWindow(t, node, rkey, mkey, v, last.Limit.Period, tc.name+" "+when)
					return
				}
				b, ok := v.(string)
				if !ok || len(b) != 28 {
					t.Fatalf("%s %s: state %q, want 28 bytes (every field in 32 bits)", tc.name, when, v)
				}
				u := func(i int) int64 { return int64(binary.LittleEndian.Uint32([]byte(b[4*i : 4*i+4]))) }
				st := window.State{Start: u(0)*int64(time.Second) + u(1), Prev: u(2), Curr: u(3)}
				exp := u(4)
				at, err := node.Do("PEXPIRETIME", rkey)
				if err != nil {
					t.Fatal(err)
				}
				if at != exp*1000 {
					t.Fatalf("%s %s: state %+v names second %d, key expires at %v ms", tc.name, when, st, exp, at)
				}
				x := st.Expiry(last.Algorithm == ratelimit.SlidingWindowCounter, last.Limit.Period)
				want := (x + int64(time.Second) - 1) / int64(time.Second)
				if exp != want {
					t.Fatalf("%s %s: state %+v (last written by %v) names second %d, want %d", tc.name, when, st, last.Algorithm, exp, want)
				}
			}
			for i := range 12 {
				req := tc.reqs[i%len(tc.reqs)]
				req.Key = key
				d, err := s.Apply(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					check(fmt.Sprintf("serial request %d", i), req)
				}
				time.Sleep(120 * time.Millisecond)
			}
			// The 700 ms window can end between the last request and the
			// check on a loaded machine, and its key with it: then run the
			// concurrent requests again (at most three times).
			for attempt := 0; ; attempt++ {
				var wg sync.WaitGroup
				for range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 8 {
							req := tc.reqs[0]
							req.Key = key
							if _, err := s.Apply(ctx, req); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				if n, err := node.Do("EXISTS", rkey, mkey); err == nil && n == int64(0) && attempt < 2 {
					continue
				}
				check("after concurrent requests", tc.reqs[0])
				break
			}
		}
	})
}

// TestStats counts script calls and the requests they carry: one each for
// requests made one at a time, fewer calls than requests for concurrent
// ones (they share batches).
func TestStats(t *testing.T) {
	s := newStore(t, standalone(t), redisstore.Options{})
	ctx := context.Background()
	lim := ratelimit.PerSecond(1000)
	for i := range 10 {
		if _, err := s.Apply(ctx, ratelimit.Request{Key: "stats-" + strconv.Itoa(i), Limit: lim, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats(); got != (redisstore.Stats{ScriptCalls: 10, Requests: 10}) {
		t.Fatalf("after 10 requests one at a time: %+v, want 10 calls of 10 requests", got)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Apply(ctx, ratelimit.Request{Key: "stats-c-" + strconv.Itoa(i), Limit: lim, N: 1}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := s.Stats()
	if got.Requests != 210 || got.ScriptCalls <= 10 || got.ScriptCalls > 210 {
		t.Fatalf("after 200 more at once: %+v, want 210 requests in 11 to 210 calls", got)
	}
	t.Logf("200 concurrent requests went in %d script calls", got.ScriptCalls-10)
}

// checkIntegerWindow checks a fixed window's integer form on node: the
// key rkey holds the count v, an integer, and expires at the end of a
// window of period p (Unix ms) that holds the server's time, or has just
// ended; no marker form is left.
func checkIntegerWindow(t *testing.T, node *redistest.Server, rkey, mkey string, v any, p time.Duration, what string) {
	t.Helper()
	c, ok := v.(string)
	if _, err := strconv.ParseInt(c, 10, 64); !ok || err != nil {
		t.Fatalf("%s: state %q, want an integer", what, v)
	}
	at, err := node.Do("PEXPIRETIME", rkey)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := at.(int64)
	if at == int64(-2) {
		return // the window ended since the request: the key is gone
	}
	now := serverMillis(t, node)
	if !ok || end%p.Milliseconds() != 0 || now >= end+1 || now < end-p.Milliseconds()-1 {
		t.Fatalf("%s: %s expires at %v ms, want the end of a %v window holding %d", what, rkey, at, p, now)
	}
	if n, err := node.Do("EXISTS", mkey); err != nil || n != int64(0) {
		t.Fatalf("%s: a marker %s exists (%v, %v)", what, mkey, n, err)
	}
}

// serverMillis returns node's clock in Unix milliseconds.
func serverMillis(t *testing.T, node *redistest.Server) int64 {
	t.Helper()
	v, err := node.Do("TIME")
	if err != nil {
		t.Fatal(err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		t.Fatalf("TIME replied %v", v)
	}
	var sec, usec int64
	fmt.Sscan(fmt.Sprint(a[0]), &sec)
	fmt.Sscan(fmt.Sprint(a[1]), &usec)
	return sec*1000 + usec/1000
}
