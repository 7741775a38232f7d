package redisinflight_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// TestFleet: four instances (each its own client and store, as four
// gateway processes) with four goroutines each enter and leave one key of
// cap 5 on the cluster: never more than 5 held at once across the fleet,
// every instance admitted some, and no slot leaked.
func TestFleet(t *testing.T) {
	const instances, workers, rounds, capacity = 4, 4, 40, 5
	c := redistest.SharedCluster(t)
	pfx := prefix()
	ctx := context.Background()
	var stores []*redisinflight.Store
	for range instances {
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(client.Close)
		s, err := redisinflight.New(client, redisinflight.Options{Prefix: pfx, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	req := inflight.Request{Key: "fleet", Cap: capacity, TTL: time.Minute}
	var held, peak atomic.Int64
	admitted := make([]atomic.Int64, instances)
	var wg sync.WaitGroup
	errs := make(chan error, instances*workers)
	for i, s := range stores {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					l, d, err := s.Acquire(ctx, req)
					if err != nil {
						errs <- err
						return
					}
					if !d.Allowed {
						continue
					}
					admitted[i].Add(1)
					h := held.Add(1)
					for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
					}
					time.Sleep(time.Millisecond) // the request's work
					held.Add(-1)
					if err := s.Release(ctx, l); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := peak.Load(); p > capacity {
		t.Errorf("%d held at once across the fleet, cap %d", p, capacity)
	}
	for i := range admitted {
		if admitted[i].Load() == 0 {
			t.Errorf("instance %d was never admitted", i)
		}
	}
	if n, err := stores[0].Peek(ctx, "fleet"); err != nil || n != 0 {
		t.Errorf("Peek after every release = %d, %v; want 0", n, err)
	}
	t.Logf("peak %d of cap %d; admitted per instance %v", peak.Load(), capacity, fmt.Sprint(
		admitted[0].Load(), admitted[1].Load(), admitted[2].Load(), admitted[3].Load()))
}
