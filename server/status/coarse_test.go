package status_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/server/status"
)

// With the default clock Record reads a coarse clock: a decision is
// counted in its minute, or in the one before when it comes less than
// CoarseResolution after the minute ended; the clock's goroutine stops
// once Record is idle (synctest fails a bubble whose goroutines outlive
// it).
func TestRecordCoarseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts on a minute: 2000-01-01 00:00 UTC.
		rec := status.NewRecorder(status.Options{Minutes: 3})
		rec.SetRules([]status.RuleInfo{{ID: "r", Name: "r"}})
		rl := rec.Rule("r")
		const every = 100 * time.Millisecond
		for range 900 { // 90 s: 600 decisions in the first minute, 300 in the second
			rl.Record(status.Allowed, "")
			time.Sleep(every)
		}
		srv := &status.Server{Name: "test", Recorder: rec}
		m := srv.Page(context.Background(), "").Rules[0].Minutes
		late := int(status.CoarseResolution / every)
		if m[0].Allowed != 0 || m[1].Allowed+m[2].Allowed != 900 || m[1].Allowed < 600 || m[1].Allowed > uint64(600+late+1) {
			t.Errorf("minutes %+v: want 600 (up to %d more) and the rest of 900", m, late+1)
		}
		// Idle, then a decision: counted in the current minute.
		time.Sleep(30 * time.Second)
		rl.Record(status.Denied, "k")
		m = srv.Page(context.Background(), "").Rules[0].Minutes
		if m[2].Denied != 1 {
			t.Errorf("minutes %+v: want the denial in the last", m)
		}
	})
}
