package redisinflight_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// ownServer starts a server of the test's own (the test kills it) and a
// client for it.
func ownServer(t *testing.T) (*redistest.Server, rueidis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, serverClient(t, srv)
}

// TestFailurePolicies: with the server killed, Acquire follows OnError;
// leases Redis holds cannot be released (an error under every policy);
// after a restart, decisions come from Redis again.
func TestFailurePolicies(t *testing.T) {
	ctx := context.Background()
	for _, p := range []ratelimit.FailurePolicy{ratelimit.FailError, ratelimit.FailAllow, ratelimit.FailDeny, ratelimit.FailLocal} {
		t.Run(p.String(), func(t *testing.T) {
			srv, client := ownServer(t)
			var failures atomic.Int64
			s, err := redisinflight.New(client, redisinflight.Options{OnError: p, Timeout: 2 * time.Second,
				BreakerThreshold: -1, OnFailure: func(error) { failures.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			req := inflight.Request{Key: "k", Cap: 2, TTL: time.Minute}
			held, d, err := s.Acquire(ctx, req)
			if err != nil || !d.Allowed {
				t.Fatalf("with Redis: %+v, %v", d, err)
			}
			srv.Kill()

			l1, d1, err1 := s.Acquire(ctx, req)
			l2, d2, err2 := s.Acquire(ctx, req)
			l3, d3, err3 := s.Acquire(ctx, req)
			switch p {
			case ratelimit.FailError:
				for _, err := range []error{err1, err2, err3} {
					if !errors.Is(err, redisinflight.ErrUnavailable) {
						t.Errorf("Acquire without Redis: %v, want ErrUnavailable", err)
					}
				}
			case ratelimit.FailAllow:
				for _, x := range []struct {
					l inflight.Lease
					d inflight.Decision
					e error
				}{{l1, d1, err1}, {l2, d2, err2}, {l3, d3, err3}} {
					if x.e != nil || !x.d.Allowed || x.l.Held() {
						t.Errorf("Acquire without Redis: %+v, %+v, %v; want allowed, a lease holding nothing", x.l, x.d, x.e)
					}
					if err := s.Release(ctx, x.l); err != nil {
						t.Errorf("Release of a lease holding nothing: %v", err)
					}
				}
			case ratelimit.FailDeny:
				for _, d := range []inflight.Decision{d1, d2, d3} {
					if d.Allowed || d.RetryAfter != time.Second { // the default BreakerCooldown
						t.Errorf("Acquire without Redis: %+v; want denied, RetryAfter the cooldown", d)
					}
				}
				if err1 != nil || err2 != nil || err3 != nil {
					t.Errorf("errors: %v %v %v", err1, err2, err3)
				}
			case ratelimit.FailLocal:
				// The local store applies the same cap, on its own.
				if err1 != nil || err2 != nil || err3 != nil || !d1.Allowed || !d2.Allowed || d3.Allowed || d2.InFlight != 2 {
					t.Errorf("Acquire without Redis: %+v %+v %+v (%v %v %v); want allowed, allowed, denied", d1, d2, d3, err1, err2, err3)
				}
				if n, err := s.Peek(ctx, "k"); err != nil || n != 2 {
					t.Errorf("Peek without Redis = %d, %v; want the local 2", n, err)
				}
				if r, err := s.Renew(ctx, l1, time.Hour); err != nil || r.ID != l1.ID {
					t.Errorf("Renew of a local lease = %+v, %v", r, err)
				}
				if err := s.Release(ctx, l1); err != nil {
					t.Errorf("Release of a local lease: %v", err)
				}
				if n, _ := s.Peek(ctx, "k"); n != 1 {
					t.Errorf("Peek after releasing a local lease = %d, want 1", n)
				}
				s.Release(ctx, l2)
			}
			// A lease Redis holds cannot be given back now.
			if err := s.Release(ctx, held); !errors.Is(err, redisinflight.ErrUnavailable) {
				t.Errorf("Release of a Redis lease without Redis: %v, want ErrUnavailable", err)
			}
			if _, err := s.Renew(ctx, held, time.Minute); !errors.Is(err, redisinflight.ErrUnavailable) {
				t.Errorf("Renew of a Redis lease without Redis: %v, want ErrUnavailable", err)
			}
			if failures.Load() == 0 {
				t.Error("OnFailure never called")
			}

			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			// The restarted server is empty (no persistence): the lease
			// taken before is gone, as after a failover that lost it. The
			// client's connections come back one by one: poll until a
			// decision comes from Redis (a lease without the local bit).
			waitFor(t, "a decision from Redis", func() bool {
				l, d, err := s.Acquire(ctx, req)
				if err == nil && d.Allowed {
					s.Release(ctx, l)
				}
				return err == nil && l.Held() && l.ID&(1<<63) == 0
			})
			if n, err := s.Peek(ctx, "k"); err != nil || n != 0 {
				t.Errorf("Peek after the restart = %d, %v; want 0", n, err)
			}
		})
	}
}

// TestBreaker: after BreakerThreshold failed calls, calls fail at once
// with the breaker's error; after the cooldown one call probes, and a
// success closes it.
func TestBreaker(t *testing.T) {
	ctx := context.Background()
	srv, client := ownServer(t)
	s, err := redisinflight.New(client, redisinflight.Options{Timeout: 2 * time.Second, BreakerThreshold: 2,
		BreakerCooldown: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := inflight.Request{Key: "k", Cap: 1}
	srv.Kill()
	for i := range 2 {
		if _, _, err := s.Acquire(ctx, req); err == nil || strings.Contains(err.Error(), "breaker") {
			t.Fatalf("call %d: %v; want a failure from Redis", i, err)
		}
	}
	_, _, err = s.Acquire(ctx, req)
	if !errors.Is(err, redisinflight.ErrUnavailable) || !strings.Contains(err.Error(), "breaker open") {
		t.Fatalf("after 2 failures: %v; want the breaker's error", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the breaker to close", func() bool {
		_, d, err := s.Acquire(ctx, req)
		return err == nil && d.Allowed
	})
}

// TestTimeout: a paused server (SIGSTOP: connections open, no answer)
// makes calls fail after Timeout with ErrUnavailable, not hang.
func TestTimeout(t *testing.T) {
	ctx := context.Background()
	srv, client := ownServer(t)
	s, err := redisinflight.New(client, redisinflight.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Acquire(ctx, inflight.Request{Key: "k", Cap: 1}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	_, _, err = s.Acquire(ctx, inflight.Request{Key: "k", Cap: 1})
	if !errors.Is(err, redisinflight.ErrUnavailable) {
		t.Fatalf("Acquire on a paused server: %v, want ErrUnavailable", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, client := ownServer(t)
	if _, err := redisinflight.New(client, redisinflight.Options{Prefix: "a{b"}); err == nil {
		t.Error("a prefix with a brace was accepted")
	}
	if _, err := redisinflight.New(client, redisinflight.Options{OnError: 9}); err == nil {
		t.Error("an unknown failure policy was accepted")
	}
	if _, err := redisinflight.New(nil, redisinflight.Options{}); err == nil {
		t.Error("a nil client was accepted")
	}
}

// TestCanceledContext: a caller that gave up gets its context's error,
// whatever the failure policy: an abandoned request is not admitted by a
// fail-open policy, nor counted as a Redis failure.
func TestCanceledContext(t *testing.T) {
	e := standalone(t)
	var failures atomic.Int64
	s := newStore(t, e, redisinflight.Options{OnError: ratelimit.FailAllow, OnFailure: func(error) { failures.Add(1) }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, d, err := s.Acquire(ctx, inflight.Request{Key: "k", Cap: 1})
	if !errors.Is(err, context.Canceled) || d.Allowed || l.Held() {
		t.Errorf("Acquire with a canceled context = %+v, %+v, %v; want context.Canceled", l, d, err)
	}
	if failures.Load() != 0 {
		t.Errorf("%d failures reported for a canceled call", failures.Load())
	}
}
