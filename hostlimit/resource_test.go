package hostlimit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestBudgetPerResource: each route is paced by the budget its answers
// named: with search's window spent, core requests go at once (virtual
// time) and search ones wait for its reset, holding no slot meanwhile
// (the concurrency is 1).
func TestBudgetPerResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Concurrency: 1})
		ctx := context.Background()
		for route, b := range map[string]Budget{
			"search": {Remaining: 0, Reset: time.Minute, Limit: 30, Resource: "search"},
			"core":   {Remaining: 4999, Reset: time.Hour, Limit: 5000, Resource: "core"},
		} {
			p, err := l.AcquireRoute(ctx, "api.github.com", route)
			if err != nil {
				t.Fatal(err)
			}
			p.Announce(b, time.Now())
			p.Done(Feedback{})
		}
		start := time.Now()
		searched := make(chan time.Duration, 1)
		go func() {
			p, err := l.AcquireRoute(ctx, "api.github.com", "search")
			if err != nil {
				t.Error(err)
			}
			searched <- time.Since(start)
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
		if d := <-searched; d != time.Minute {
			t.Errorf("search sent at %v, want at its reset, 1m", d)
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
