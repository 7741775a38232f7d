package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// The way back to Redis: once Redis answers again, the first requests are
// decided by Redis, not by the failure policy, however long the
// background prober would still wait. The stores here probe in the
// background only after 5 s, so that only callers' trials can bring them
// back within the test; requests go one at a time, backPace apart, and
// the count of those the policy answered after Redis is back is bounded
// by the trials' pace (BreakerTrial) over the requests' pace, plus the
// trial in flight: a count, not a time.

const (
	backPace  = 10 * time.Millisecond
	backTrial = 20 * time.Millisecond
	// backAfter is the requests counted after Redis is back, backMost the
	// most of them the failure policy may answer: the requests of two
	// trial intervals and a trial's round trip under a loaded machine's
	// delays (each request waits backPace first, so fewer, not more, fit
	// in a slow interval).
	backAfter = 50
	backMost  = 8
)

func backOpts(trial time.Duration) redisstore.Options {
	return redisstore.Options{
		Prefix: prefix(), OnError: ratelimit.FailAllow, Timeout: faultTimeout,
		BreakerCooldown: 5 * time.Second, BreakerMaxCooldown: 5 * time.Second, BreakerTrial: trial,
	}
}

// back is the measure of s's way back through an outage of srv.
func back(t *testing.T, s *redisstore.Store, srv *redistest.Server, o redistest.Outage) uint64 {
	t.Helper()
	req := ratelimit.Request{Key: "back", Limit: ratelimit.PerSecond(100000), N: 1}
	b := redistest.Back{
		Call: func() error {
			if d, err := s.Apply(context.Background(), req); err != nil || !d.Allowed {
				return fmt.Errorf("%+v, %v; want allowed", d, err)
			}
			return nil
		},
		Connected:     func() bool { return s.Health().Connected },
		PolicyAnswers: func() uint64 { return s.Stats().PolicyAnswers },
		Pace:          backPace, After: backAfter,
	}
	n := b.Run(t, srv, o)
	t.Logf("%s: %d of the %d requests after Redis answered were answered by the failure policy (%v)", o.Name, n, backAfter, s.Health())
	return n
}

// TestBackAfterRestart: Redis killed and restarted on the same port, with
// its data (SAVE before the kill) and empty (its scripts gone too), then
// paused and continued (silent, then answering).
func TestBackAfterRestart(t *testing.T) {
	redistest.Require(t)
	for _, tc := range redistest.Outages {
		t.Run(tc.Name, func(t *testing.T) {
			srv := redistest.Start(t)
			s, err := redisstore.Open(context.Background(), srv.URL(), backOpts(backTrial))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			defer srv.Resume() // a failed paused case must not leave it stopped
			n := back(t, s, srv, tc)
			if n > backMost {
				t.Errorf("%d of %d requests after Redis answered got the failure policy, want at most %d", n, backAfter, backMost)
			}
			if s.Stats().Trials == 0 {
				t.Error("no caller's trial counted")
			}
		})
	}
}

// TestBackWithoutTrials is the control: with callers' trials off, only
// the prober (5 s away) closes the breaker, and every request counted
// after Redis is back gets the policy. It shows the count above measures
// the trials.
func TestBackWithoutTrials(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.Open(context.Background(), srv.URL(), backOpts(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := back(t, s, srv, redistest.Outages[1])
	if n != backAfter {
		t.Errorf("without trials %d of %d requests got the policy, want all", n, backAfter)
	}
}

// TestClusterPrimaryLost kills one primary of a 3+3 Cluster under load:
// the keys on the two healthy primaries keep being decided by Redis (the
// breaker is per node), and once the replica took over, the lost slots
// come back to Redis. It logs how long after the promotion, and what the
// failover lost of the charges (asynchronous replication): the lost
// keys' charges admitted, less what the promoted replica counts (a fixed
// window of an hour, which nothing refills).
func TestClusterPrimaryLost(t *testing.T) {
	cl := redistest.StartClusterReplicas(t, 3, 1, time.Second)
	opts := backOpts(0)
	opts.OnError = ratelimit.FailError // answers are counted per key
	s, err := redisstore.Open(context.Background(), cl.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 1 << 40, Period: time.Hour}
	victim, lost, kept := clusterKeys(t, cl, victimNone, func(k string) string { return s.Key(ratelimit.GCRA, k) })
	// The in-flight store on the same client and link, as a gateway has it.
	is, err := redisinflight.New(s.Client(), redisinflight.Options{Prefix: prefix(), Link: s.Link(), Timeout: faultTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer is.Close()
	_, ilost, ikept := clusterKeys(t, cl, victim, func(k string) string { z, _ := is.Keys(k); return z })
	var ikeptFail, ilostBack atomic.Int64
	acquire := func(k string) error {
		l, _, err := is.Acquire(ctx, inflight.Request{Key: k, Cap: 1 << 20})
		if err == nil {
			is.Release(ctx, l)
		}
		return err
	}
	admitted := map[string]*atomic.Int64{}
	for _, k := range append(append([]string{}, lost...), kept...) {
		admitted[k] = new(atomic.Int64)
	}
	req := func(k string, n int64) ratelimit.Request {
		return ratelimit.Request{Key: k, Limit: lim, Algorithm: ratelimit.FixedWindow, N: n}
	}
	// Every key decided by Redis, and the slot map read.
	eventually(t, func() bool {
		for k, a := range admitted {
			if _, err := s.Apply(ctx, req(k, 1)); err != nil {
				return false
			}
			a.Add(1)
		}
		return s.Link().Slots() != nil
	})
	var keptFail, keptOK, lostOK atomic.Int64
	var lostBack atomic.Int64 // Unix ns of the first lost-key decision by Redis after the promotion
	var promoted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				k, isLost := kept[i%len(kept)], false
				if i%2 == 0 {
					k, isLost = lost[i%len(lost)], true
				}
				d, err := s.Apply(ctx, req(k, 1))
				if err == nil && d.Allowed {
					admitted[k].Add(1)
				}
				if ierr := acquire(ikept[i%len(ikept)]); ierr != nil {
					ikeptFail.Add(1)
					t.Logf("in-flight kept key: %v", ierr)
				}
				if acquire(ilost[i%len(ilost)]) == nil && promoted.Load() != 0 {
					ilostBack.CompareAndSwap(0, time.Now().UnixNano())
				}
				switch {
				case !isLost && err != nil:
					keptFail.Add(1)
					t.Logf("kept key %s: %v", k, err)
				case !isLost:
					keptOK.Add(1)
				case err == nil:
					lostOK.Add(1)
					if p := promoted.Load(); p != 0 {
						lostBack.CompareAndSwap(0, time.Now().UnixNano())
					}
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	killed := time.Now()
	victim.Kill()
	// The replica takes over: three masters again.
	for deadline := time.Now().Add(20 * time.Second); len(cl.Masters()) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatal("no replica took over in 20 s")
		}
	}
	promoted.Store(time.Now().UnixNano())
	for deadline := time.Now().Add(20 * time.Second); lostBack.Load() == 0 || ilostBack.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	back, iback := lostBack.Load(), ilostBack.Load()
	if back == 0 || iback == 0 {
		t.Fatalf("the lost slots never came back to Redis after the promotion (rate store %v, in-flight store %v)", back != 0, iback != 0)
	}
	var charged, counted int64
	for _, k := range lost {
		d, err := s.Apply(ctx, req(k, 0))
		if err != nil {
			t.Fatalf("peek of %s after the failover: %v", k, err)
		}
		charged, counted = charged+admitted[k].Load(), counted+lim.Rate-d.Remaining
	}
	t.Logf("promotion %v after the kill; lost slots decided by Redis again %v after it; kept keys: %d decided by Redis, %d failed; "+
		"the failover lost %d of the %d charges admitted on the lost keys (asynchronous replication: over-admission)",
		time.Duration(promoted.Load()-killed.UnixNano()), time.Duration(back-promoted.Load()), keptOK.Load(), keptFail.Load(),
		charged-counted, charged)
	t.Logf("in-flight store: %d acquisitions on the healthy primaries failed; lost slots back %v after the promotion",
		ikeptFail.Load(), time.Duration(iback-promoted.Load()))
	if n := keptFail.Load(); n > 2 {
		t.Errorf("%d requests on the healthy primaries' keys failed (of %d), want ~0: the lost node's breaker covers them", n, n+keptOK.Load())
	}
	if n := ikeptFail.Load(); n > 2 {
		t.Errorf("%d acquisitions on the healthy primaries' keys failed, want ~0", n)
	}
}

// victimNone asks clusterKeys to choose the victim.
var victimNone *redistest.Server

// clusterKeys returns victim (when nil, the node serving the first of 24
// keys), and of the keys, those whose Redis key (redisKey) it serves and
// those it does not.
func clusterKeys(t *testing.T, cl *redistest.Cluster, victim *redistest.Server, redisKey func(string) string) (*redistest.Server, []string, []string) {
	var lost, kept []string
	for i := range 24 {
		k := "ck" + strconv.Itoa(i)
		n, err := cl.NodeFor(redisKey(k))
		if err != nil {
			t.Fatal(err)
		}
		if victim == nil {
			victim = n
		}
		if n == victim {
			lost = append(lost, k)
		} else {
			kept = append(kept, k)
		}
	}
	if len(kept) == 0 || len(lost) == 0 {
		t.Fatal(errors.New("24 keys on one node"))
	}
	return victim, lost, kept
}
