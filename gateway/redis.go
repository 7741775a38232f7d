package gateway

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/ratelimit"
)

func openRedis(ctx context.Context, u string) (ratelimit.Store, func() error, error) {
	return nil, nil, errors.New("redis store not available in this build")
}
