package redisinflight_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
	"github.com/sluicehq/sluice/inflight/redisinflight"
)

func TestConformance(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		inflighttest.Run(t, func(t *testing.T, now func() time.Time) inflight.Store {
			return newStore(t, e, redisinflight.Options{Now: now})
		})
	})
}
