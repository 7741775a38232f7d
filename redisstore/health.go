package redisstore

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Health is what a Store knows of its connection to Redis, for a server's
// metrics and readiness detail (Store.Health).
type Health struct {
	// Connected reports whether decisions go to Redis. When false, Apply
	// answers every request with Options.OnError at once, without calling
	// Redis, while the store probes Redis in the background: the store
	// started without Redis (Open could not connect), or the breaker opened
	// after Options.BreakerThreshold consecutive failed calls.
	Connected bool
	// Since is when Connected last changed (when the store was made, at
	// first).
	Since time.Time
	// LastError is the last failure: a failed call to Redis, a failed
	// connection attempt or probe. It stays after Redis is back, until the
	// next failure replaces it; nil when there was none.
	LastError error
	// Failures counts the failed calls to Redis (each a batch of
	// requests), connection attempts and probes since the store was made:
	// the errors Options.OnFailure receives.
	Failures uint64
	// Reconnects counts the times the store went back to Redis after
	// losing it, or connected after starting without it.
	Reconnects uint64
}

// String describes h in one line: "connected since 2026-01-02T15:04:05Z
// (0 failures, 0 reconnects)", or "disconnected since … (12 failures, 1
// reconnects; last error: …)".
func (h Health) String() string {
	state := "connected"
	if !h.Connected {
		state = "disconnected"
	}
	s := fmt.Sprintf("%s since %s (%d failures, %d reconnects", state, h.Since.UTC().Format(time.RFC3339), h.Failures, h.Reconnects)
	if h.LastError != nil {
		s += "; last error: " + h.LastError.Error()
	}
	return s + ")"
}

// link is the state of a Store's connection to Redis: a breaker that opens
// after threshold consecutive failed calls, and the schedule of the
// background probes that close it. While it is down, Apply does not call
// Redis. It runs on the real clock (not Options.Now): it measures an
// outage, not limiter time.
type link struct {
	threshold             int
	cooldown, maxCooldown time.Duration
	onHealth              func(Health)

	down atomic.Bool   // fast path: false while Redis answers
	err  atomic.Value  // of downErr: what Apply reports while down
	wake chan struct{} // buffered: the link went down, the prober starts

	clean atomic.Bool // no failure since the last success

	mu          sync.Mutex
	consecutive int    // failed calls in a row
	reason      string // why the link is down
	since       time.Time
	last        error
	failures    uint64
	reconnects  uint64
}

// downErr holds the error Apply reports while the link is down (an
// atomic.Value needs one concrete type).
type downErr struct{ err error }

func newLink(threshold int, cooldown, maxCooldown time.Duration, onHealth func(Health)) *link {
	l := &link{
		threshold: threshold, cooldown: cooldown, maxCooldown: max(maxCooldown, cooldown),
		onHealth: onHealth, wake: make(chan struct{}, 1), since: time.Now(),
	}
	l.clean.Store(true)
	if threshold < 0 {
		l.threshold = int(^uint(0) >> 1)
	}
	return l
}

// isDown reports whether Apply must not call Redis now.
func (l *link) isDown() bool { return l.down.Load() }

// downError returns the error Apply reports while the link is down.
func (l *link) downError() error {
	e, _ := l.err.Load().(downErr)
	return e.err
}

// setErrLocked sets the error Apply reports while down, after err.
func (l *link) setErrLocked(err error) {
	l.err.Store(downErr{fmt.Errorf("%w: %s since %s; last error: %v", ErrUnavailable, l.reason, l.since.Format(time.RFC3339Nano), err)})
}

// fail records a failed call to Redis (a batch of requests), or a failed
// connection attempt or probe (probe true): at the threshold of
// consecutive failed calls, the link goes down and the prober starts.
func (l *link) fail(err error, probe bool) {
	l.mu.Lock()
	l.failures++
	l.last = err
	l.clean.Store(false)
	if !probe {
		l.consecutive++
	}
	wentDown := false
	var h Health
	switch {
	case l.down.Load():
		l.setErrLocked(err)
	case !probe && l.consecutive >= l.threshold:
		l.since = time.Now()
		l.reason = fmt.Sprintf("breaker open after %d consecutive failures", l.consecutive)
		l.setErrLocked(err)
		l.down.Store(true)
		wentDown, h = true, l.healthLocked()
	}
	l.mu.Unlock()
	if wentDown {
		l.kick()
		if l.onHealth != nil {
			l.onHealth(h)
		}
	}
}

// startDown marks a store that could not connect at start: down from the
// start, after err, and the prober woken.
func (l *link) startDown(err error) {
	l.mu.Lock()
	l.failures++
	l.last = err
	l.clean.Store(false)
	l.reason = "not connected"
	l.setErrLocked(err)
	l.down.Store(true)
	l.mu.Unlock()
	l.kick()
}

// ok records a successful call or probe: Redis answers, the link is up.
func (l *link) ok() {
	if !l.down.Load() && l.clean.Load() {
		return // the fast path of every batch while Redis is healthy
	}
	l.mu.Lock()
	l.consecutive = 0
	l.clean.Store(true)
	wasDown := l.down.Load()
	var h Health
	if wasDown {
		l.down.Store(false)
		l.since = time.Now()
		l.reconnects++
		h = l.healthLocked()
	}
	l.mu.Unlock()
	if wasDown && l.onHealth != nil {
		l.onHealth(h)
	}
}

// kick wakes the prober.
func (l *link) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *link) health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healthLocked()
}

func (l *link) healthLocked() Health {
	return Health{
		Connected: !l.down.Load(), Since: l.since, LastError: l.last,
		Failures: l.failures, Reconnects: l.reconnects,
	}
}

// backoff returns the wait before probe n (from 0) of an outage: the
// cooldown, doubled after each failed probe up to maxCooldown, and
// lengthened by a random fraction of up to a quarter, so that the
// instances of a fleet that lost Redis together do not probe in step.
func (l *link) backoff(n int) time.Duration {
	d := l.cooldown
	for i := 0; i < n && d < l.maxCooldown; i++ {
		d *= 2
	}
	d = min(d, l.maxCooldown)
	return d + rand.N(d/4+1)
}
