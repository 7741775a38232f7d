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

// back is the measure of s's way back through an outage of srv.
func back(t *testing.T, s *redisinflight.Store, srv *redistest.Server, o redistest.Outage) uint64 {
	t.Helper()
	ctx := context.Background()
	b := redistest.Back{
		Call: func() error {
			l, _, err := s.Acquire(ctx, inflight.Request{Key: "back", Cap: 1 << 20})
			if err == nil {
				s.Release(ctx, l)
			}
			return err
		},
		Connected:     func() bool { return s.Health().Connected },
		PolicyAnswers: func() uint64 { return s.Stats().PolicyAnswers },
		Pace:          backPace, After: backAfter,
	}
	n := b.Run(t, srv, o)
	t.Logf("%s: %d of the %d acquisitions after Redis answered were answered by the failure policy (%v)", o.Name, n, backAfter, s.Health())
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
			if n := back(t, s, srv, tc); n > backMost {
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
	if n := back(t, s, srv, redistest.Outages[1]); n != backAfter {
		t.Errorf("with slow trials %d of %d acquisitions got the policy, want all", n, backAfter)
	}
}
