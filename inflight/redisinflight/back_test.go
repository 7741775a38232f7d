package redisinflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// The way back to Redis, as redisstore's back_test.go checks it for the
// rate limit store: once Redis answers again, the first acquisitions are
// decided by Redis. Calls go one at a time, backPace apart; the count of
// those the policy answered after Redis is back is bounded by the trials'
// pace over the calls' pace, plus the trial in flight.

const (
	backPace  = 10 * time.Millisecond
	backTrial = 20 * time.Millisecond
	backAfter = 50
	backMost  = 8
)

// until retries f every backPace until it holds, for at most 20 s.
func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !f(); time.Sleep(backPace) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after 20 s", what)
		}
	}
}

// policyAfterBack takes Redis away with down until the breaker opens, and
// a few more calls, brings it back with up, and returns how many of the
// next backAfter acquisitions the failure policy answered.
func policyAfterBack(t *testing.T, s *redisinflight.Store, srv *redistest.Server, down, up func() error) uint64 {
	t.Helper()
	ctx := context.Background()
	req := inflight.Request{Key: "back", Cap: 1 << 20}
	acquire := func() error {
		l, _, err := s.Acquire(ctx, req)
		if err == nil {
			s.Release(ctx, l)
		}
		return err
	}
	until(t, "decided by Redis", func() bool { return acquire() == nil && s.Health().Connected })
	if err := down(); err != nil {
		t.Fatal(err)
	}
	until(t, "the breaker open", func() bool { acquire(); return !s.Health().Connected })
	for range 5 {
		acquire()
		time.Sleep(backPace)
	}
	if err := up(); err != nil {
		t.Fatal(err)
	}
	if v, err := srv.Do("PING"); err != nil || v != "PONG" {
		t.Fatalf("PING after the outage: %v, %v", v, err)
	}
	before := s.Stats().PolicyAnswers
	for range backAfter {
		time.Sleep(backPace)
		if err := acquire(); err != nil {
			t.Fatalf("after Redis is back: %v", err)
		}
	}
	n := s.Stats().PolicyAnswers - before
	t.Logf("%d of the %d acquisitions after Redis answered were answered by the failure policy (%v)", n, backAfter, s.Health())
	return n
}

// serverClient returns a client of srv, closed when t ends.
func serverClient(t *testing.T, srv *redistest.Server) rueidis.Client {
	t.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true, Dialer: netDialer()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func backStore(t *testing.T, srv *redistest.Server, trial time.Duration) *redisinflight.Store {
	t.Helper()
	client := serverClient(t, srv)
	s, err := redisinflight.New(client, redisinflight.Options{Prefix: redistest.Prefix(t), OnError: ratelimit.FailAllow,
		Timeout: 250 * time.Millisecond, BreakerTrial: trial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestBackAfterRestart: Redis killed and restarted on the same port, with
// its data (SAVE) and empty (its scripts gone too), then paused and
// continued.
func TestBackAfterRestart(t *testing.T) {
	redistest.Require(t)
	for _, tc := range redistest.Outages {
		t.Run(tc.Name, func(t *testing.T) {
			srv := redistest.Start(t)
			defer srv.Resume()
			s := backStore(t, srv, backTrial)
			if n := policyAfterBack(t, s, srv, func() error { return tc.Down(srv) }, func() error { return tc.Up(srv) }); n > backMost {
				t.Errorf("%d of %d acquisitions after Redis answered got the failure policy, want at most %d", n, backAfter, backMost)
			}
		})
	}
}

// TestBackSlowTrials is the control: with a trial every 2 s (the old
// scheme's 1 s cooldown, and more), every acquisition counted after Redis
// is back gets the policy.
func TestBackSlowTrials(t *testing.T) {
	srv := redistest.Start(t)
	s := backStore(t, srv, 2*time.Second)
	if n := policyAfterBack(t, s, srv, func() error { srv.Kill(); return nil }, srv.Restart); n != backAfter {
		t.Errorf("with slow trials %d of %d acquisitions got the policy, want all", n, backAfter)
	}
}
