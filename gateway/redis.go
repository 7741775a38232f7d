package gateway

import (
	"context"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// openRedis opens the Redis store at u (redis://, rediss://,
// redis-cluster://). It keeps redisstore's default of returning errors, so
// that the gateway's fail_closed policy (fail open by default) decides.
func openRedis(ctx context.Context, u string) (ratelimit.Store, func() error, error) {
	s, err := redisstore.Open(ctx, u, redisstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
