package redisstore_test

import (
	"cmp"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Reconnection tests use servers of their own: they kill, restart and
// pause them.

// reconnectOpts are the options of the stores that lose Redis here: short
// probes, so that recovery is seen within a fraction of eventually's 20 s.
func reconnectOpts(policy ratelimit.FailurePolicy) redisstore.Options {
	return redisstore.Options{
		Prefix:             prefix(),
		OnError:            policy,
		Timeout:            faultTimeout,
		BreakerCooldown:    20 * time.Millisecond,
		BreakerMaxCooldown: 100 * time.Millisecond,
	}
}

// checkPolicy fails t unless d, err is what policy answers for a first
// request of cost 1 within a fresh limit (Local: admitted by a fresh
// local limiter).
func checkPolicy(t *testing.T, what string, policy ratelimit.FailurePolicy, d ratelimit.Decision, err error) {
	t.Helper()
	switch policy {
	case ratelimit.FailError:
		if !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("%s: %+v, %v; want ErrUnavailable", what, d, err)
		}
	case ratelimit.FailAllow, ratelimit.FailLocal:
		if err != nil || !d.Allowed {
			t.Fatalf("%s: %+v, %v; want allowed by the %v policy", what, d, err, policy)
		}
	case ratelimit.FailDeny:
		if err != nil || d.Allowed || d.RetryAfter <= 0 || d.ResetAfter < d.RetryAfter {
			t.Fatalf("%s: %+v, %v; want denied by the policy, with a RetryAfter, not full again before it", what, d, err)
		}
	}
}

// scriptSHA returns the SHA1 that Redis names a script by.
func scriptSHA(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

// healthLog records what OnHealth reports.
type healthLog struct {
	mu  sync.Mutex
	got []redisstore.Health
}

func (h *healthLog) add(x redisstore.Health) { h.mu.Lock(); h.got = append(h.got, x); h.mu.Unlock() }

func (h *healthLog) connected() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []bool
	for _, x := range h.got {
		out = append(out, x.Connected)
	}
	return out
}

// recovered waits until decisions on s come from node again: a fresh key's
// decision leaves its state in node.
func recovered(t *testing.T, s *redisstore.Store, node func(key string) *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	i := 0
	eventually(t, func() bool {
		i++
		k := "back-" + strconv.Itoa(i)
		d, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: lim, N: 1})
		if err != nil || !d.Allowed || d.Remaining != 1 {
			return false
		}
		// The state in Redis is the decision's: an hour-long TTL, and a
		// second and third call see it (1 left, then none).
		ttl, err := node(s.Key(ratelimit.GCRA, k)).Do("PTTL", s.Key(ratelimit.GCRA, k))
		if ms, ok := ttl.(int64); err != nil || !ok || ms <= 0 {
			return false
		}
		// A call that fails (its timeout passed on a loaded machine) is
		// answered by the failure policy: try again on a fresh key. A
		// store that never denies by Redis's state still fails the test,
		// when eventually gives up.
		if d, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: lim, N: 1}); err != nil || !d.Allowed || d.Remaining != 0 {
			t.Logf("second call on %s after recovery: %+v, %v; want the last one admitted", k, d, err)
			return false
		}
		if d, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: lim, N: 1}); err != nil || d.Allowed {
			t.Logf("third call on %s after recovery: %+v, %v; want denied by Redis's state", k, d, err)
			return false
		}
		return true
	})
	if h := s.Health(); !h.Connected || h.Reconnects == 0 {
		t.Fatalf("after recovery: %v; want connected, with a reconnect counted", h)
	}
}

// TestDownAtStart opens a store while nothing listens on Redis's port:
// Open succeeds, every policy answers from the first request, and once
// redis-server starts on that port the store connects, loads its scripts
// and decides in Redis.
func TestDownAtStart(t *testing.T) {
	for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailError, ratelimit.FailAllow, ratelimit.FailDeny, ratelimit.FailLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			srv.Kill()
			var hl healthLog
			var failures atomic.Int64
			opts := reconnectOpts(policy)
			opts.OnHealth = hl.add
			opts.OnFailure = func(error) { failures.Add(1) }
			s, err := redisstore.Open(context.Background(), srv.URL(), opts)
			if err != nil {
				t.Fatalf("Open with Redis down: %v", err)
			}
			defer s.Close()
			h := s.Health()
			if h.Connected || h.LastError == nil || !errors.Is(h.LastError, redisstore.ErrUnavailable) || h.Failures == 0 {
				t.Fatalf("health with Redis down: %v; want disconnected, with the connection's error", h)
			}
			if failures.Load() == 0 {
				t.Error("OnFailure not called for the failed connection")
			}
			for i := range 3 {
				t0 := time.Now()
				d, err := s.Apply(context.Background(), ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: ratelimit.PerMinute(5), N: 1})
				checkPolicy(t, "call "+strconv.Itoa(i)+" with Redis down", policy, d, err)
				if took := time.Since(t0); took > faultBound {
					t.Errorf("call %d with Redis down took %v, want at most %v", i, took, faultBound)
				}
			}
			if policy == ratelimit.FailError {
				_, err := s.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(5), N: 1})
				if !strings.Contains(err.Error(), "not connected") {
					t.Errorf("error with Redis down: %q, want it to say the store is not connected", err)
				}
			}
			// The prober keeps trying, boundedly: a few failures, not a
			// busy loop.
			eventually(t, func() bool { return s.Health().Failures >= 3 })

			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			recovered(t, s, func(string) *redistest.Server { return srv })
			// The scripts were loaded when the server came back (a
			// restarted server has none).
			for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog} {
				sha := scriptSHA(redisstore.Script(alg))
				v, err := srv.Do("SCRIPT", "EXISTS", sha)
				if l, ok := v.([]any); err != nil || !ok || len(l) != 1 || l[0] != int64(1) {
					t.Errorf("SCRIPT EXISTS for %v after recovery = %v, %v; want loaded", alg, v, err)
				}
			}
			if got := hl.connected(); len(got) != 1 || !got[0] {
				t.Errorf("OnHealth reported connected = %v, want [true] (one reconnection)", got)
			}
		})
	}
}

// TestDownAtStartCluster is TestDownAtStart on a 3-master cluster whose
// nodes are all down when the store opens: the slots are discovered in the
// background once they are back.
func TestDownAtStartCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, n := range c.Nodes {
		n.Kill()
	}
	s, err := redisstore.Open(context.Background(), c.URL(), reconnectOpts(ratelimit.FailDeny))
	if err != nil {
		t.Fatalf("Open with the cluster down: %v", err)
	}
	defer s.Close()
	if h := s.Health(); h.Connected {
		t.Fatalf("health with the cluster down: %v; want disconnected", h)
	}
	for i := range 3 {
		d, err := s.Apply(context.Background(), ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: ratelimit.PerMinute(5), N: 1})
		checkPolicy(t, "call "+strconv.Itoa(i)+" with the cluster down", ratelimit.FailDeny, d, err)
	}
	eventually(t, func() bool { return s.Health().Failures >= 3 })
	for _, n := range c.Nodes {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitOK(redistest.StartTimeout); err != nil {
		t.Fatal(err)
	}
	recovered(t, s, func(key string) *redistest.Server {
		n, err := c.NodeFor(key)
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
	// Keys on every node: the store knows the whole cluster, not only the
	// node that answered first.
	nodes := map[*redistest.Server]bool{}
	for i := 0; len(nodes) < len(c.Nodes) && i < 1000; i++ {
		k := "spread-" + strconv.Itoa(i)
		if _, err := s.Apply(context.Background(), ratelimit.Request{Key: k, Limit: ratelimit.PerMinute(5), N: 1}); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		n, err := c.NodeFor(s.Key(ratelimit.GCRA, k))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := n.Do("EXISTS", s.Key(ratelimit.GCRA, k)); err != nil || v != int64(1) {
			t.Fatalf("EXISTS %s on its node = %v, %v; want 1", k, v, err)
		}
		nodes[n] = true
	}
	if len(nodes) != len(c.Nodes) {
		t.Fatalf("keys landed on %d nodes, want %d", len(nodes), len(c.Nodes))
	}
}

// TestLostAndBack checks Health and OnHealth through an outage of a store
// that started connected: disconnected once the breaker opens, connected
// again after a background probe, without a request paying for it.
func TestLostAndBack(t *testing.T) {
	srv := redistest.Start(t)
	var hl healthLog
	opts := reconnectOpts(ratelimit.FailAllow)
	opts.OnHealth = hl.add
	s, err := redisstore.Open(context.Background(), srv.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	req := ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1000), N: 1}
	eventually(t, func() bool { _, err := s.Apply(ctx, req); return err == nil && s.Health().Connected })
	srv.Kill()
	eventually(t, func() bool {
		d, err := s.Apply(ctx, req)
		checkPolicy(t, "Redis killed", ratelimit.FailAllow, d, err)
		return !s.Health().Connected
	})
	if h := s.Health(); h.LastError == nil || !strings.Contains(h.String(), "disconnected since") {
		t.Fatalf("health after the breaker opened: %v", h)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// No request: the prober alone brings the store back.
	eventually(t, func() bool { return s.Health().Connected })
	recovered(t, s, func(string) *redistest.Server { return srv })
	if got := hl.connected(); len(got) != 2 || got[0] || !got[1] {
		t.Errorf("OnHealth reported connected = %v, want [false true]", got)
	}
}

// TestHungAtStart opens a store on a server that accepts connections and
// never answers (paused): Open returns after its dial timeout, the policy
// answers at once, and the store connects once the server continues.
func TestHungAtStart(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	opts := reconnectOpts(ratelimit.FailDeny)
	s, err := redisstore.Open(context.Background(), srv.URL(), opts)
	if err != nil {
		t.Fatalf("Open with Redis hung: %v", err)
	}
	defer s.Close()
	if h := s.Health(); h.Connected {
		t.Fatalf("health with Redis hung: %v; want disconnected", h)
	}
	d, err := s.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(5), N: 1})
	checkPolicy(t, "Redis hung", ratelimit.FailDeny, d, err)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	recovered(t, s, func(string) *redistest.Server { return srv })
}

// storeGoroutines returns the stacks of the goroutines running the
// store's code (its workers, watchdog and prober).
func storeGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sluice/redisstore.(") {
			out = append(out, g)
		}
	}
	return out
}

// hungListener accepts connections and never answers them, until the test
// ends.
func hungListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// TestCloseDuringReconnect closes stores whose prober is reconnecting, to
// a refused port and to a listener that never answers: Close returns
// (within the dial timeout it waits for) and no goroutine of the store or
// of its client is left.
func TestCloseDuringReconnect(t *testing.T) {
	redistest.Require(t)
	dead := redistest.Start(t)
	dead.Kill()
	const dial = time.Second // Open's dial timeout: max(Timeout, 1s)
	for _, tc := range []struct{ name, url string }{
		{"refused", dead.URL()},
		{"hung", "redis://" + hungListener(t)},
		{"hung cluster", "redis-cluster://" + hungListener(t) + "," + dead.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if g := storeGoroutines(); len(g) > 0 {
				t.Fatalf("store goroutines before the test:\n%s", strings.Join(g, "\n\n"))
			}
			before := runtime.NumGoroutine()
			opts := reconnectOpts(ratelimit.FailAllow)
			opts.BreakerCooldown, opts.BreakerMaxCooldown = time.Millisecond, 5*time.Millisecond
			s, err := redisstore.Open(context.Background(), tc.url, opts)
			if err != nil {
				t.Fatal(err)
			}
			// Let the prober loop through a few attempts, then close it in
			// the middle of one (most likely: attempts are back to back).
			eventually(t, func() bool { return s.Health().Failures >= 3 })
			t0 := time.Now()
			s.Close()
			took := time.Since(t0)
			t.Logf("Close took %v", took)
			if took > dial+faultBound {
				t.Errorf("Close took %v, want at most the dial timeout %v (+%v)", took, dial, faultBound)
			}
			if _, err := s.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), N: 1}); !errors.Is(err, ratelimit.ErrClosed) {
				t.Fatalf("Apply after Close: %v, want ErrClosed", err)
			}
			n := runtime.NumGoroutine()
			for deadline := time.Now().Add(5 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
				time.Sleep(10 * time.Millisecond)
			}
			if n > before {
				t.Errorf("%d goroutines after Close, %d before Open", n, before)
			}
			if g := storeGoroutines(); len(g) > 0 {
				t.Errorf("store goroutines after Close:\n%s", strings.Join(g, "\n\n"))
			}
		})
	}
}

// TestHungWaitBound holds the documented bound with Redis hung (paused:
// connections accepted, nothing answered) and many concurrent callers:
// every call, queued behind hung batches or not, returns the policy's
// answer within 1.25·Timeout of being made (the watchdog's granularity),
// plus a slack for scheduling that does not grow with the timeout.
func TestHungWaitBound(t *testing.T) {
	const (
		timeout = 200 * time.Millisecond
		bound   = timeout + timeout/4
		slack   = 100 * time.Millisecond
		callers = 64
		run     = 1500 * time.Millisecond
	)
	for _, tc := range []struct {
		name      string
		policy    ratelimit.FailurePolicy
		threshold int
		maxBatch  int
		algorithm ratelimit.Algorithm
		callers   int
	}{
		// With the breaker off every call goes to Redis and waits, behind
		// batches that hang for the full timeout.
		{"deny, no breaker", ratelimit.FailDeny, -1, 0, 0, 0},
		{"allow, no breaker, small batches", ratelimit.FailAllow, -1, 4, 0, 0},
		{"deny, breaker", ratelimit.FailDeny, 0, 0, 0, 0},
		// Lone fixed-window charges go as plain commands, in the
		// caller's goroutine (fast.go), until the breaker opens.
		{"deny, breaker, lone fixed windows", ratelimit.FailDeny, 0, 0, ratelimit.FixedWindow, 1},
		{"allow, no breaker, lone fixed windows", ratelimit.FailAllow, -1, 0, ratelimit.FixedWindow, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			s, err := redisstore.Open(context.Background(), srv.URL(), redisstore.Options{
				Prefix: prefix(), OnError: tc.policy, Timeout: timeout,
				BreakerThreshold: tc.threshold, BreakerCooldown: time.Hour, MaxBatch: tc.maxBatch,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			lim := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
			// Connections up, scripts loaded.
			eventually(t, func() bool {
				_, err := s.Apply(ctx, ratelimit.Request{Key: "warm", Limit: lim, N: 0})
				return err == nil
			})
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			defer srv.Resume()

			var wg sync.WaitGroup
			var calls, slow atomic.Int64
			var worst atomic.Int64
			stop := time.Now().Add(run)
			// The control: how late a goroutine that only sleeps wakes up,
			// at worst, during the run. When the whole process stalls (a
			// loaded shared machine), every caller's wait grows by as much,
			// through no fault of the store.
			var stall time.Duration
			controlled := make(chan struct{})
			go func() {
				defer close(controlled)
				for time.Now().Before(stop) {
					t0 := time.Now()
					time.Sleep(5 * time.Millisecond)
					stall = max(stall, time.Since(t0)-5*time.Millisecond)
				}
			}()
			for g := range cmp.Or(tc.callers, callers) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; time.Now().Before(stop); i++ {
						// Fresh keys: Redis would admit each, so a denial
						// is the policy's, and vice versa.
						req := ratelimit.Request{Key: "c" + strconv.Itoa(g) + "-" + strconv.Itoa(i), Limit: lim, N: 1, Algorithm: tc.algorithm}
						t0 := time.Now()
						d, err := s.Apply(ctx, req)
						took := time.Since(t0)
						calls.Add(1)
						for w := worst.Load(); int64(took) > w && !worst.CompareAndSwap(w, int64(took)); w = worst.Load() {
						}
						if took > bound+slack {
							slow.Add(1)
						}
						// A steady load, not a spin: with the breaker open a
						// call takes microseconds, and 64 spinning callers
						// would measure their wait for a CPU.
						time.Sleep(time.Millisecond)
						switch {
						case err != nil:
							t.Errorf("call with Redis hung: %v, want the %v policy's decision", err, tc.policy)
							return
						case d.Allowed != (tc.policy == ratelimit.FailAllow):
							t.Errorf("call with Redis hung: %+v, want the %v policy's decision", d, tc.policy)
							return
						}
					}
				}()
			}
			wg.Wait()
			<-controlled
			t.Logf("%d calls, the longest %v (bound %v + slack %v); the process stalled for up to %v", calls.Load(), time.Duration(worst.Load()), bound, slack, stall)
			if n, w := slow.Load(), time.Duration(worst.Load()); n > 0 && w > bound+slack+stall {
				t.Errorf("%d of %d calls waited longer than %v; the longest %v, more than the bound, the slack and the process's worst stall (%v)", n, calls.Load(), bound+slack, w, stall)
			}
			if st := s.Stats(); tc.algorithm == ratelimit.FixedWindow && st.Commands == 0 {
				t.Errorf("stats %+v: no charge went as plain commands, the path this case is for", st)
			}
			if calls.Load() < int64(cmp.Or(tc.callers, callers)) {
				t.Errorf("%d calls in %v, want at least one per caller", calls.Load(), run)
			}
		})
	}
}

// TestCloseHoldsTheBound closes a store while its calls wait on a new
// connection to a hung server (its connections dropped, then the
// redis-server paused): they still return within the bound, the policy's
// answer or ErrClosed. The watchdog stops only after the workers, so it
// keeps the deadlines of the calls Close drains.
func TestCloseHoldsTheBound(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, env{client: ownClient(t, srv.Addr)}, redisstore.Options{
		OnError: ratelimit.FailDeny, Timeout: faultTimeout, BreakerThreshold: -1,
	})
	ctx := context.Background()
	lim := ratelimit.PerSecond(1000)
	if _, err := s.Apply(ctx, ratelimit.Request{Key: "warm", Limit: lim, N: 1}); err != nil {
		t.Fatal(err)
	}
	// Drop the client's connections, then hang the server: the next call
	// dials again, and the handshake gets no answer.
	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	const bound = faultTimeout + faultTimeout/4 + 100*time.Millisecond
	var wg sync.WaitGroup
	var slow atomic.Int64
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			d, err := s.Apply(ctx, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, N: 1})
			if took := time.Since(t0); took > bound {
				slow.Add(1)
				t.Errorf("call %d took %v, want at most %v", i, took, bound)
			}
			if err == nil && d.Allowed {
				t.Errorf("call %d with Redis hung: %+v, want denied by the policy or ErrClosed", i, d)
			}
		}()
	}
	time.Sleep(faultTimeout / 5)
	s.Close()
	wg.Wait()
}

// TestTrialHoldsTheBound: a caller's trial of a node whose breaker is
// open gets the policy's answer at its deadline while the client library
// still waits for a connection (rueidis does not end every connection
// attempt with the call's context: its DialFn takes none, and the callers
// of a connection being made wait for its handshake, whose failure can
// take a second more to close). The trial used to wait in the caller's
// goroutine for as long as the client did: with Redis hung, a breaker
// trial behind a handshake that failed waited 0.7-0.9 s
// (TestHungWaitBound/deny,_breaker).
func TestTrialHoldsTheBound(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t)
	const (
		pass = iota
		refuse
		hold
	)
	var mode, holding atomic.Int32
	release := make(chan struct{})
	defer close(release) // before the store's and the client's Close (cleanups)
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{srv.Addr}, DisableCache: true,
		DialFn: func(addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			switch mode.Load() {
			case refuse:
				return nil, errors.New("dial refused by the test")
			case hold:
				holding.Add(1)
				<-release
			}
			return d.Dial("tcp", addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := newStore(t, env{client: c}, redisstore.Options{
		OnError: ratelimit.FailDeny, Timeout: faultTimeout,
		BreakerThreshold: 1, BreakerTrial: time.Millisecond, BreakerCooldown: time.Hour,
	})
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	if _, err := s.Apply(ctx, ratelimit.Request{Key: "warm", Limit: lim, N: 0}); err != nil {
		t.Fatal(err)
	}
	// Connections dropped and refused: the breaker opens.
	mode.Store(refuse)
	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		s.Apply(ctx, ratelimit.Request{Key: "open", Limit: lim, N: 1})
		return !s.Health().Connected
	})
	// From now on a connection attempt waits until the test ends. The
	// callers go on until a trial has made one (the first trials may find
	// a connection whose loss the client has not seen yet): its caller
	// must have its answer all the same.
	mode.Store(hold)
	for i := 0; holding.Load() == 0; i++ {
		if i == 1000 {
			t.Fatalf("no connection attempt in %d calls with the breaker open (%+v)", i, s.Stats())
		}
		done := make(chan error, 1)
		go func() {
			d, err := s.Apply(ctx, ratelimit.Request{Key: "k", Limit: lim, N: 1})
			if err == nil && d.Allowed {
				err = errors.New("allowed, want the deny policy's answer")
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second): // only to fail instead of hanging
			t.Fatalf("a call still waits after 10 s (Timeout %v): the trial waits for the client's connection attempt", faultTimeout)
		}
		time.Sleep(time.Millisecond) // the next trial is a BreakerTrial away
	}
	if s.Stats().Trials == 0 {
		t.Error("no trial counted")
	}
}
