package redisstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// nodeAlgorithms are one algorithm of each shape.
var nodeAlgorithms = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog}

// burst applies, for each algorithm, a request on each of keys, all at
// once; when cl is set, the store's one worker is first held by a request
// to a paused node, so that the burst queues whole and goes out after.
// It returns the decisions by algorithm and key.
func burst(t *testing.T, s *Store, cl *redistest.Cluster, round int, keys []string) map[string]ratelimit.Decision {
	t.Helper()
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 3, Period: time.Minute, Burst: 3}
	var blocked sync.WaitGroup
	var paused *redistest.Server
	if cl != nil {
		blocker := fmt.Sprintf("blocker%d", round)
		n, err := cl.NodeFor(s.key(shapeBucket, blocker))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		paused = n
		defer func() {
			if paused != nil {
				paused.Resume()
			}
		}()
		blocked.Add(1)
		go func() {
			defer blocked.Done()
			if _, err := s.Apply(ctx, ratelimit.Request{Key: blocker, Limit: lim, N: 1}); err != nil {
				t.Errorf("blocker: %v", err)
			}
		}()
		waitBatcher(t, s.batch, "the blocker in flight", func(flying, queued int) bool { return flying == 1 && queued == 0 })
	}
	var mu sync.Mutex
	out := map[string]ratelimit.Decision{}
	var wg sync.WaitGroup
	for _, a := range nodeAlgorithms {
		for _, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := s.Apply(ctx, ratelimit.Request{Key: k, Algorithm: a, Limit: lim, N: 1})
				if err != nil {
					t.Errorf("%v %s: %v", a, k, err)
				}
				mu.Lock()
				out[fmt.Sprint(a, " ", k)] = d
				mu.Unlock()
			}()
		}
	}
	if cl != nil {
		all := len(keys) * len(nodeAlgorithms)
		waitBatcher(t, s.batch, "the burst to queue", func(flying, queued int) bool { return queued == all })
		if err := paused.Resume(); err != nil {
			t.Fatal(err)
		}
		paused = nil
	}
	wg.Wait()
	blocked.Wait()
	return out
}

func waitBatcher(t *testing.T, b *batcher, what string, ok func(flying, queued int) bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		f, q := len(b.flying), b.queued
		b.mu.Unlock()
		if ok(f, q) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %d in flight, %d queued", what, f, q)
		}
	}
}

// nodeStores returns a store on a new 3-master cluster with one worker,
// once it knows the slot map, and one on a standalone server, both on one
// fixed clock.
func nodeStores(t *testing.T) (*Store, *Store, *redistest.Cluster) {
	cl := redistest.StartCluster(t, 3)
	srv := redistest.Start(t)
	now := time.Unix(1_700_000_000, 0)
	opts := Options{Timeout: 20 * time.Second, Pipeline: 1, MaxBatch: 1000, ScriptOnly: true, Now: func() time.Time { return now }}
	ctx := context.Background()
	cs, err := Open(ctx, cl.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	ss, err := Open(ctx, srv.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	for deadline := time.Now().Add(20 * time.Second); cs.link.Slots() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the store never read the slot map")
		}
		cs.readSlots()
	}
	return cs, ss, cl
}

func nodeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user%d", i)
	}
	return keys
}

// TestNodeBatches checks that on a 3-master Cluster a batch of keys of
// many slots goes out as one script call per node and shape, and decides
// as a standalone server does, round after round (allowed three times,
// then denied).
func TestNodeBatches(t *testing.T) {
	cs, ss, cl := nodeStores(t)
	keys := nodeKeys(200)
	slots := map[uint16]bool{}
	for _, k := range keys {
		slots[redislink.Slot(cs.key(shapeBucket, k))] = true
	}
	if len(slots) < 150 {
		t.Fatalf("the keys span only %d slots", len(slots))
	}
	for round := range 4 {
		before := cs.Stats()
		got := burst(t, cs, cl, round, keys)
		after := cs.Stats()
		// The blocker, then one call per node for each shape.
		if calls := after.ScriptCalls - before.ScriptCalls; calls != 1+3*uint64(len(nodeAlgorithms)) {
			t.Errorf("round %d: %d script calls for %d requests, want %d", round, calls, after.Requests-before.Requests, 1+3*len(nodeAlgorithms))
		}
		want := burst(t, ss, nil, round, keys)
		for k, w := range want {
			if g := got[k]; g != w {
				t.Fatalf("round %d, %s: cluster %+v, standalone %+v", round, k, g, w)
			}
			if w.Allowed != (round < 3) {
				t.Fatalf("round %d, %s: allowed %v", round, k, w.Allowed)
			}
		}
	}
	if st := cs.Stats(); st.SplitBatches != 0 {
		t.Errorf("SplitBatches = %d with the true slot map", st.SplitBatches)
	}
}

// TestNodeBatchStaleMap checks a stale slot map: a node batch that finds
// keys its node does not serve goes again one call per slot, nothing
// charged twice or lost.
func TestNodeBatchStaleMap(t *testing.T) {
	cs, ss, cl := nodeStores(t)
	keys := nodeKeys(60)
	for round := range 4 {
		// Every slot on one node, and no reading of the true map.
		m := &redislink.Slots{}
		for i := range m.Of {
			m.Of[i] = 1
		}
		cs.link.SetSlots(m, []string{"one"})
		cs.nodes.last.Store(math.MaxInt64)
		before := cs.Stats()
		got := burst(t, cs, cl, round, keys)
		after := cs.Stats()
		if n := after.SplitBatches - before.SplitBatches; n != uint64(len(nodeAlgorithms)) {
			t.Errorf("round %d: %d split batches, want %d", round, n, len(nodeAlgorithms))
		}
		want := burst(t, ss, nil, round, keys)
		for k, w := range want {
			if g := got[k]; g != w {
				t.Fatalf("round %d, %s: cluster %+v, standalone %+v", round, k, g, w)
			}
		}
	}
}

// TestMisrouted checks which replies send a node batch again per slot.
func TestMisrouted(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	m, addrs, err := fetchSlots(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[uint16]bool{}
	for _, n := range m.Of {
		if n == 0 {
			t.Fatal("a slot without a node")
		}
		nodes[n] = true
	}
	if len(nodes) != 3 || len(addrs) != 3 {
		t.Fatalf("%d nodes in the slot map (%v), want 3", len(nodes), addrs)
	}
	// Two keys of other nodes: the node script refuses them before writing.
	a, b := "a", "b"
	for m.Of[redislink.Slot(a)] == m.Of[redislink.Slot(b)] {
		b += "b"
	}
	src := nodeSources[shapeBucket]
	args := []string{"2", "GET", a, b, "1000", "0", "1", "1", "1", "1", "1"}
	err = rueidis.NewLuaScript(src).Exec(ctx, client, []string{a}, args).Error()
	if !misrouted(err) {
		t.Fatalf("node script across nodes: %v, want a misrouted error", err)
	}
	if n, err := client.Do(ctx, client.B().Exists().Key(a).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the refused call wrote %s: EXISTS = %d, %v", a, n, err)
	}
	if misrouted(context.DeadlineExceeded) || misrouted(fmt.Errorf("x")) {
		t.Fatal("a non-Redis error taken as misrouted")
	}
}
