package redisstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

func TestConformance(t *testing.T) {
	layouts(t, func(t *testing.T, e env) {
		ratelimittest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
			return newStore(t, e, redisstore.Options{Now: now})
		})
	})
}
