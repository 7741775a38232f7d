package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Fault tests use servers of their own: they kill them.

// faultBound is how long a decision may take while Redis is down: the
// timeout plus a generous allowance for a loaded CI machine under -race.
const (
	faultTimeout = 100 * time.Millisecond
	faultBound   = faultTimeout + 2*time.Second
)

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
					t.Errorf("Apply took %v (started %s), want at most %v", d, t0.Format("05.000"), bound)
				}
			}
		}()
	}
	return func() int64 { wg.Wait(); return errs.Load() }
}

func TestKillUnderLoad(t *testing.T) {
	lim := ratelimit.Limit{Rate: 5, Period: time.Hour, Burst: 5}
	for _, policy := range []redisstore.Policy{redisstore.ReturnError, redisstore.Allow, redisstore.Deny, redisstore.Local} {
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

			// Healthy: the key's limit is enforced by Redis.
			req := ratelimit.Request{Key: "k", Limit: lim, N: 5}
			if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("healthy: Apply = %+v, %v; want allowed", d, err)
			}

			srv.Kill()
			req.N = 1
			for i := range 10 {
				t0 := time.Now()
				d, err := s.Apply(ctx, req)
				if took := time.Since(t0); took > faultBound {
					t.Errorf("down, call %d: took %v, want at most %v", i, took, faultBound)
				}
				switch policy {
				case redisstore.ReturnError:
					if !errors.Is(err, redisstore.ErrUnavailable) {
						t.Fatalf("down, call %d: err = %v, want ErrUnavailable", i, err)
					}
				case redisstore.Allow:
					if err != nil || !d.Allowed {
						t.Fatalf("down, call %d: %+v, %v; want allowed", i, d, err)
					}
				case redisstore.Deny:
					if err != nil || d.Allowed || d.RetryAfter <= 0 {
						t.Fatalf("down, call %d: %+v, %v; want denied with a RetryAfter", i, d, err)
					}
				case redisstore.Local:
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
			// Redis again (the restarted server is empty: 5 admitted, and the
			// key exists there).
			deadline := time.Now().Add(10 * time.Second)
			for {
				d, err := s.Apply(ctx, ratelimit.Request{Key: "after", Limit: lim, N: 5})
				if v, _ := srv.Do("EXISTS", s.Key(ratelimit.GCRA, "after")); err == nil && d.Allowed && v == int64(1) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no recovery 10s after restart: last %+v, %v", d, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			close(stop)
			wait()
		})
	}
}

// TestHungServer pauses Redis (connections stay open, nothing answers):
// calls end at the timeout, then the breaker answers at once.
func TestHungServer(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, env{client: ownClient(t, srv.Addr)}, redisstore.Options{
		OnError: redisstore.Deny, Timeout: faultTimeout, BreakerThreshold: 2, BreakerCooldown: time.Hour,
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
		if took < faultTimeout/2 || took > faultBound {
			t.Errorf("call %d took %v, want about the timeout %v", i, took, faultTimeout)
		}
	}
	// The breaker is open: no more waiting for the timeout.
	for i := range 100 {
		t0 := time.Now()
		if d, err := s.Apply(ctx, req); err != nil || d.Allowed {
			t.Fatalf("breaker open, call %d: %+v, %v; want denied by policy", i, d, err)
		}
		if took := time.Since(t0); took >= faultTimeout {
			t.Fatalf("breaker open, call %d took %v: it waited for Redis", i, took)
		}
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
		if _, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: lim, N: 1}); err != nil {
			t.Fatalf("healthy cluster, key %s: %v", k, err)
		}
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
