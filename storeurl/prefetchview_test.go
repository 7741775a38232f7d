package storeurl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestPrefetchView: none for the memory store; on Redis without prefetch=, one
// view made on first use, counted in the prefetch metrics and closed with the
// store; with prefetch=on, the store's own prefetch mode.
func TestPrefetchView(t *testing.T) {
	ctx := context.Background()
	mem, err := Open(ctx, "memory", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := mem.PrefetchView(); l != nil || err != nil {
		t.Errorf("memory: PrefetchView = %v, %v; want nil, nil", l, err)
	}
	mem.Close()

	redistest.Require(t)
	url := redistest.Shared(t).URL()
	on, err := Open(ctx, url+"?prefetch=on", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := on.PrefetchView(); err != nil || l == nil || l != on.Prefetch {
		t.Errorf("prefetch=on: PrefetchView = %v, %v; want the store's prefetch mode %v", l, err, on.Prefetch)
	}
	on.Close()

	st, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := st.Register(reg); err != nil {
		t.Fatal(err)
	}
	l, err := st.PrefetchView()
	if err != nil || l == nil || st.Prefetch != nil || st.Store != st.Redis {
		t.Fatalf("PrefetchView = %v, %v (store's prefetch mode %v): want a view beside the exact store", l, err, st.Prefetch)
	}
	if again, _ := st.PrefetchView(); again != l {
		t.Error("a second PrefetchView made another view")
	}
	key := redistest.Prefix(t) + "hot"
	lim := ratelimit.Limit{Rate: 1_000_000, Period: time.Second}
	for range 200 {
		if _, err := l.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.GCRA, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	local := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "sluice_redis_prefetch_local_total" {
			local = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if local <= 0 {
		t.Errorf("sluice_redis_prefetch_local_total = %v after 200 decisions of a hot key, want the view's local decisions", local)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.GCRA, N: 1}); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("the view after the store's Close: %v, want ErrClosed", err)
	}
}
