package hostlimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestFleetSharesRedis: two workers, each with its own Limiter and its own
// Redis client (as two processes would be), share one per-host budget
// through a real redis-server: together they start the host's rate, not
// twice it.
func TestFleetSharesRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	t.Parallel()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var workers []*Limiter
	for range 2 {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		store, err := redisstore.New(t.Context(), c, redisstore.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		workers = append(workers, New(Options{Rate: 20, Burst: 1, Store: store, KeyPrefix: prefix}))
	}
	const window = 1500 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), window)
	defer cancel()
	started := startAll(ctx, workers, "a.example")
	// 20/s for 1.5 s, burst 1: about 30 (fewer if the machine is slow),
	// never the 60 of two separate budgets.
	if started > 32 || started < 15 {
		t.Errorf("two workers sharing Redis started %d requests in %v, want about 30 (one budget of 20/s)", started, window)
	}
	t.Logf("two workers, one Redis budget of 20/s: %d requests in %v", started, window)
}
