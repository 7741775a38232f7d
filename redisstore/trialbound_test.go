package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

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
