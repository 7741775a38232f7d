package inflight_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
)

func TestConformance(t *testing.T) {
	inflighttest.Run(t, func(t *testing.T, now func() time.Time) inflight.Store {
		s := inflight.NewMemory(inflight.MemoryOptions{Now: now})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestConformanceSmall: one shard holding few keys, so the idle ring and
// the record reuse are exercised on every key.
func TestConformanceSmall(t *testing.T) {
	inflighttest.Run(t, func(t *testing.T, now func() time.Time) inflight.Store {
		s := inflight.NewMemory(inflight.MemoryOptions{Now: now, Shards: 1, MaxKeys: -1})
		t.Cleanup(func() { s.Close() })
		return s
	})
}
