package gateway

import (
	"context"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// openRedis opens the Redis store at u (redis://, rediss://,
// redis-cluster://). The store falls back to a local memory store itself
// with on_store_error: local; otherwise it returns errors, and the
// middleware applies the policy (allow skips the rule, deny answers 429,
// error 503).
func openRedis(ctx context.Context, u string, p ratelimit.FailurePolicy) (ratelimit.Store, func() error, error) {
	var opts redisstore.Options
	if p == ratelimit.FailLocal {
		opts.OnError = redisstore.Local
	}
	s, err := redisstore.Open(ctx, u, opts)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
