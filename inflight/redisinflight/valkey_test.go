package redisinflight_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// TestValkey runs the conformance suite and the differential test against
// valkey-server (skipped where it is not installed, failed under CI=true):
// the scripts use only what Valkey keeps of Redis (sorted sets, TIME,
// PEXPIRE).
func TestValkey(t *testing.T) {
	srv := redistest.StartValkey(t)
	e := env{"valkey", sharedClient(t, []string{srv.Addr})}
	t.Run("conformance", func(t *testing.T) {
		inflighttest.Run(t, func(t *testing.T, now func() time.Time) inflight.Store {
			return newStore(t, e, redisinflight.Options{Now: now})
		})
	})
	t.Run("differential", func(t *testing.T) {
		c := inflighttest.NewClock(inflighttest.Epoch)
		mem := inflight.NewMemory(inflight.MemoryOptions{Now: c.Now})
		red := newStore(t, e, redisinflight.Options{Now: c.Now})
		differential(t, 1, c, mem, red)
	})
}
