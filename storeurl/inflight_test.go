package storeurl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storeurl"
)

// holdTwo acquires two of a cap of 2 and is refused a third, then checks
// that the store holds them.
func holdTwo(t *testing.T, is inflight.Store) {
	t.Helper()
	ctx := context.Background()
	req := inflight.Request{Key: "caller", Cap: 2, TTL: time.Minute}
	for i := range 3 {
		_, d, err := is.Acquire(ctx, req)
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("acquire %d: %+v, %v; want allowed only for the first 2", i, d, err)
		}
	}
	if n, err := is.Peek(ctx, "caller"); err != nil || n != 2 {
		t.Fatalf("Peek = %d, %v; want 2", n, err)
	}
}

// TestInFlightBesideTheStore: the in-flight store is made once, beside
// the rate limit store (in process for memory; on the same Redis for a
// Redis URL), later calls return it whatever their options, and the
// store's Close closes it.
func TestInFlightBesideTheStore(t *testing.T) {
	urls := map[string]func(t *testing.T) string{
		"memory": func(*testing.T) string { return storeurl.Memory },
		"redis":  func(t *testing.T) string { return redistest.Start(t).URL() },
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			st, err := storeurl.Open(context.Background(), url(t), storeurl.Options{Redis: redisstore.Options{Timeout: 10 * time.Second, RequireAtStart: true}})
			if err != nil {
				t.Fatal(err)
			}
			is := st.InFlight(storeurl.InFlightOptions{Timeout: 10 * time.Second})
			holdTwo(t, is)
			if again := st.InFlight(storeurl.InFlightOptions{MaxKeys: 1}); again != is {
				t.Fatalf("a second InFlight made another store")
			}
			decide(t, st, "rate") // the rate limits still decide
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := is.Acquire(context.Background(), inflight.Request{Key: "x", Cap: 1}); !errors.Is(err, inflight.ErrClosed) {
				t.Fatalf("Acquire after Close: %v; want inflight.ErrClosed", err)
			}
		})
	}
}
