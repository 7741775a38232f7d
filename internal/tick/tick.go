// Package tick is the loop behind every background job of sluice (a
// sweeper, a clock refresher, a flusher, a poller): call a function every
// period until told to stop, in a goroutine its caller owns and waits for.
// One loop, so that each job's code is only what it does on a tick.
package tick

import (
	"context"
	"time"
)

// Loop calls f with each tick's time every d until stop is closed, then
// returns; f's run is never cut short. Run it in the goroutine that the
// job's owner stops and waits for:
//
//	go func() { defer wg.Done(); tick.Loop(stop, time.Second, sweep) }()
func Loop(stop <-chan struct{}, d time.Duration, f func(now time.Time)) {
	While(stop, d, func(now time.Time) bool { f(now); return true })
}

// While is Loop for a job that can find itself done: it returns when stop
// is closed or as soon as f returns false.
func While(stop <-chan struct{}, d time.Duration, f func(now time.Time) bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if !f(now) {
				return
			}
		}
	}
}

// Sleep waits d or until ctx is done, whichever comes first, and returns
// ctx's error in the latter case. A d ≤ 0 returns at once (nil, unless ctx
// is done).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
