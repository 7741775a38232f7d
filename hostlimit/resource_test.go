package hostlimit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// TestBudgetPerResource: each route is paced by the budget its answers
// named: with search's window spent, core requests go at once (virtual
// time) and search ones wait for its reset, holding no slot meanwhile
// (the concurrency is 1).
func TestBudgetPerResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Concurrency: 1})
		ctx := context.Background()
		// Search first: a spent budget learnt from one route does not
		// hold the first request of another.
		var reset time.Time
		for _, b := range []Budget{
			{Remaining: 0, Reset: time.Minute, Limit: 30, Resource: "search"},
			{Remaining: 4999, Reset: time.Hour, Limit: 5000, Resource: "core"},
		} {
			p, err := l.AcquireRoute(ctx, "api.github.com", b.Resource)
			if err != nil {
				t.Fatal(err)
			}
			if b.Resource == "search" {
				reset = time.Now().Add(b.Reset)
			}
			p.Announce(b, time.Now())
			p.Done(Feedback{})
		}
		start := time.Now()
		searched := make(chan time.Time, 1)
		go func() {
			p, err := l.AcquireRoute(ctx, "api.github.com", "search")
			if err != nil {
				t.Error(err)
			}
			searched <- time.Now()
			p.Done(Feedback{})
		}()
		synctest.Wait()
		var core []time.Duration
		for range 10 {
			p, err := l.AcquireRoute(ctx, "api.github.com", "core")
			if err != nil {
				t.Fatal(err)
			}
			core = append(core, time.Since(start))
			p.Done(Feedback{})
		}
		if want := repeat(10, 0); !slices.Equal(core, want) {
			t.Errorf("core sent at %v, want %v", core, want)
		}
		if at := <-searched; !at.Equal(reset) {
			t.Errorf("search sent %v after its reset", at.Sub(reset))
		}
		if d := reset.Sub(start); d <= 0 {
			t.Errorf("the core requests went %v after the search reset, want before", -d)
		}
	})
}

// TestResourceBounds: a host keeps at most MaxResources budgets (idle
// ones are evicted, the rest share the unnamed one) and MaxRoutes routes.
func TestResourceBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Concurrency: 1000})
		ctx := context.Background()
		var held []*Permit
		for i := range 3 * MaxRoutes {
			p, err := l.AcquireRoute(ctx, "h", fmt.Sprint("r", i))
			if err != nil {
				t.Fatal(err)
			}
			// Busy budgets (a request in flight, the model live) cannot
			// be evicted.
			p.Announce(Budget{Remaining: 1e6, Reset: time.Hour, Resource: fmt.Sprint("res", i)}, time.Now())
			held = append(held, p)
		}
		h := l.hosts["h"]
		h.mu.Lock()
		nb, nr := len(h.budgets), len(h.routes)
		h.mu.Unlock()
		if nb != MaxResources || nr != MaxRoutes {
			t.Errorf("%d budgets, %d routes; want %d and %d", nb, nr, MaxResources, MaxRoutes)
		}
		for _, p := range held {
			p.Done(Feedback{})
		}
	})
}

// BenchmarkAcquireRoute: requests on two routes paced by two announced
// budgets of one host.
func BenchmarkAcquireRoute(b *testing.B) {
	b.ReportAllocs()
	l := New(Options{Rate: 1e9, Burst: 1000000, Concurrency: 1 << 20})
	ctx := context.Background()
	routes := []string{"GET /search", "GET /repos"}
	for i, r := range routes {
		p, err := l.AcquireRoute(ctx, "a.example", r)
		if err != nil {
			b.Fatal(err)
		}
		p.Announce(Budget{Remaining: 1 << 40, Reset: time.Hour, Resource: fmt.Sprint("res", i)}, time.Now())
		p.Done(Feedback{})
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p, err := l.AcquireRoute(ctx, "a.example", routes[i%2])
			if err != nil {
				b.Fatal(err)
			}
			i++
			p.Done(Feedback{Signal: adaptive.Success, Latency: time.Millisecond})
		}
	})
}
