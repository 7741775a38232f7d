package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/bench/redis"
)

// Measure runs an operation from many callers for a while and reports
// decisions per second and latency percentiles; redis-compare runs it for
// every contender in turn and pools the rounds with Merge.
func ExampleMeasure() {
	admitEveryOther := func(ctx context.Context, rng *rand.Rand) (bool, error) {
		return rng.IntN(2) == 0, nil
	}
	r := redis.Measure(context.Background(), "toy", 4, 20*time.Millisecond, admitEveryOther)
	pooled := redis.Merge([]redis.Result{r, r})
	fmt.Println(r.Decisions > 0, r.Errors, pooled.Decisions == 2*r.Decisions, r.P50 <= r.P99)
	// Output: true 0 true true
}
