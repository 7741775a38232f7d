package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Fault tests use servers of their own: they kill them.

// faultBound is how long a decision may take while Redis is down: the
// timeout plus a generous allowance for a loaded CI machine under -race.
const (
	faultTimeout = 250 * time.Millisecond
	faultBound   = faultTimeout + 5*time.Second
)

// eventually retries f until it holds, for at most 20 seconds.
func eventually(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("condition still false after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ownClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// load applies requests for key from 8 goroutines until stop is closed and
// counts the errors; it checks that no call takes longer than bound.
func load(t *testing.T, s *redisstore.Store, req ratelimit.Request, stop <-chan struct{}, bound time.Duration) (wait func() int64) {
	var wg sync.WaitGroup
	var errs atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if _, err := s.Apply(context.Background(), req); err != nil {
					errs.Add(1)
				}
				if d := time.Since(t0); d > bound {
					t.Errorf("Apply took %v, want at most %v", d, bound)
				}
				// Steady load, not a spin: with the breaker open a call
				// takes microseconds.
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return func() int64 { wg.Wait(); return errs.Load() }
}

func TestKillUnderLoad(t *testing.T) {
	lim := ratelimit.Limit{Rate: 5, Period: time.Hour, Burst: 5}
	for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailError, ratelimit.FailAllow, ratelimit.FailDeny, ratelimit.FailLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			var failures atomic.Int64
			s := newStore(t, env{client: ownClient(t, srv.Addr)}, redisstore.Options{
				OnError:         policy,
				Timeout:         faultTimeout,
				BreakerCooldown: 50 * time.Millisecond,
				OnFailure:       func(error) { failures.Add(1) },
			})
			ctx := context.Background()
			other := ratelimit.Request{Key: "load", Limit: ratelimit.PerSecond(1e6), N: 1}
			stop := make(chan struct{})
			wait := load(t, s, other, stop, faultBound)

			// Healthy: decisions land in Redis (retried: on a loaded machine
			// a call may miss the short timeout).
			eventually(t, func() bool {
				s.Apply(ctx, ratelimit.Request{Key: "healthy", Limit: lim, N: 1})
				v, _ := srv.Do("EXISTS", s.Key(ratelimit.GCRA, "healthy"))
				return v == int64(1)
			})

			srv.Kill()
			req := ratelimit.Request{Key: "down", Limit: lim, N: 1}
			for i := range 10 {
				t0 := time.Now()
				d, err := s.Apply(ctx, req)
				if took := time.Since(t0); took > faultBound {
					t.Errorf("down, call %d: took %v, want at most %v", i, took, faultBound)
				}
				switch policy {
				case ratelimit.FailError:
					if !errors.Is(err, redisstore.ErrUnavailable) {
						t.Fatalf("down, call %d: err = %v, want ErrUnavailable", i, err)
					}
				case ratelimit.FailAllow:
					if err != nil || !d.Allowed {
						t.Fatalf("down, call %d: %+v, %v; want allowed", i, d, err)
					}
				case ratelimit.FailDeny:
					if err != nil || d.Allowed || d.RetryAfter <= 0 || d.ResetAfter < d.RetryAfter {
						t.Fatalf("down, call %d: %+v, %v; want denied with a RetryAfter, not full again before it", i, d, err)
					}
				case ratelimit.FailLocal:
					// A fresh local limiter: 5 admitted, then denied.
					if err != nil || d.Allowed != (i < 5) {
						t.Fatalf("down, call %d: %+v, %v; want allowed only for the first 5", i, d, err)
					}
				}
			}
			if failures.Load() == 0 {
				t.Error("OnFailure was never called while Redis was down")
			}

			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			// Recovery: within a few breaker cooldowns, decisions come from
			// Redis again: the key a decision is about exists there.
			i := 0
			eventually(t, func() bool {
				i++
				k := "after-" + strconv.Itoa(i)
				_, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: lim, N: 1})
				v, _ := srv.Do("EXISTS", s.Key(ratelimit.GCRA, k))
				return err == nil && v == int64(1)
			})
			close(stop)
			wait()
		})
	}
}

// TestHungServer pauses Redis (connections stay open, nothing answers):
// calls end at the timeout, then the breaker answers at once.
func TestHungServer(t *testing.T) {
	srv := redistest.Start(t)
	var failures atomic.Int64
	s := newStore(t, env{client: ownClient(t, srv.Addr)}, redisstore.Options{
		OnError: ratelimit.FailDeny, Timeout: faultTimeout, BreakerThreshold: 2, BreakerCooldown: time.Hour,
		OnFailure: func(error) { failures.Add(1) },
	})
	ctx := context.Background()
	req := ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(10), N: 1}
	if _, err := s.Apply(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Resume() })
	for i := range 2 {
		t0 := time.Now()
		d, err := s.Apply(ctx, req)
		took := time.Since(t0)
		if err != nil || d.Allowed {
			t.Fatalf("call %d: %+v, %v; want denied by policy", i, d, err)
		}
		// The first call waits for the timeout; the client may then fail
		// the next one at once.
		if (i == 0 && took < faultTimeout/2) || took > faultBound {
			t.Errorf("call %d took %v, want about the timeout %v", i, took, faultTimeout)
		}
	}
	// The breaker opens once the two batches' failures are counted (just
	// after their callers gave up on them); from then on no call goes to
	// Redis, so no new failure is seen.
	deadline := time.Now().Add(10 * time.Second)
	for failures.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d failures counted 10s after two timeouts, want 2", failures.Load())
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 100 {
		if d, err := s.Apply(ctx, req); err != nil || d.Allowed {
			t.Fatalf("breaker open, call %d: %+v, %v; want denied by policy", i, d, err)
		}
	}
	if n := failures.Load(); n != 2 {
		t.Fatalf("%d failures after 100 calls with the breaker open, want still 2: calls went to Redis", n)
	}
}

// TestClusterNodeLoss kills the node holding one key: that key's decisions
// fail cleanly (ErrUnavailable, within the bound); keys on the other nodes
// keep working.
func TestClusterNodeLoss(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	s := newStore(t, env{client: ownClient(t, c.Addrs()...)}, redisstore.Options{
		Timeout: faultTimeout, BreakerThreshold: -1, // a store-wide breaker would hide the other nodes
	})
	ctx := context.Background()
	lim := ratelimit.PerSecond(1000)
	// Find keys on two different nodes.
	var lost, kept string
	var victim *redistest.Server
	for i := 0; lost == "" || kept == ""; i++ {
		k := "key" + string(rune('a'+i))
		n, err := c.NodeFor(s.Key(ratelimit.GCRA, k))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case victim == nil:
			victim, lost = n, k
		case n != victim && kept == "":
			kept = k
		}
	}
	for _, k := range []string{lost, kept} {
		eventually(t, func() bool {
			_, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: lim, N: 1})
			return err == nil
		})
	}
	victim.Kill()
	for i := range 5 {
		t0 := time.Now()
		_, err := s.Apply(ctx, ratelimit.Request{Key: lost, Limit: lim, N: 1})
		if !errors.Is(err, redisstore.ErrUnavailable) {
			t.Fatalf("call %d on the lost node's key: err = %v, want ErrUnavailable", i, err)
		}
		if took := time.Since(t0); took > faultBound {
			t.Errorf("call %d took %v, want at most %v", i, took, faultBound)
		}
	}
	// The other nodes still answer for their slots. The client may need a
	// moment to refresh its view of the cluster.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Apply(ctx, ratelimit.Request{Key: kept, Limit: lim, N: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key on a surviving node: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
