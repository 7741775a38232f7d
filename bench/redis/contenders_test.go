package redis

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// TestContenders checks that every contender limits: on one key, a burst
// of calls admits the limit's burst and denies the rest, within what the
// rate refilled meanwhile. A benchmark of a limiter that does not limit
// would be meaningless.
func TestContenders(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	src, err := GCRAScript()
	if err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.Open(ctx, "redis://"+srv.Addr, redisstore.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })

	old := KeySpace
	KeySpace = 1
	t.Cleanup(func() { KeySpace = old })
	for _, c := range []struct {
		name   string
		op     Op
		window bool
	}{
		{"redis_rate", RedisRate(rdb, "rr:"), false},
		{"gcra.lua via go-redis", GoRedisScript(rdb, src, "gr:"), false},
		{"gcra.lua via rueidis", RueidisScript(rc, src, "ru:"), false},
		{"envoy fixed window", EnvoyFixedWindow(rdb, "ev:"), true},
		{"INCRBY+PEXPIRE via rueidis", FixedWindowPipe(rc, "fp:"), true},
		{"minimal window script", FixedWindowScript(rc, "fs:"), true},
		{"sluice gcra", Sluice(store, ratelimit.GCRA, "sg:"), false},
		{"sluice fixed window", Sluice(store, ratelimit.FixedWindow, "sf:"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			start := time.Now()
			admitted := 0
			for range 300 {
				ok, err := c.op(ctx, rng)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					admitted++
				}
			}
			elapsed := time.Since(start)
			lim := BenchLimit.Normalize()
			// Bucket: Burst plus the refill. Window: Rate per window touched.
			bound := lim.Burst + int64(elapsed/lim.Interval()) + 1
			if c.window {
				bound = lim.Rate * (int64(elapsed/lim.Period) + 2)
			}
			if int64(admitted) < min(lim.Burst, lim.Rate) || int64(admitted) > bound {
				t.Errorf("admitted %d of 300 in %v, want between %d and %d", admitted, elapsed, min(lim.Burst, lim.Rate), bound)
			}
		})
	}
}
