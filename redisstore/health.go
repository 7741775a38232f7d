package redisstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker stops calls to Redis after threshold consecutive failures, for
// cooldown; then one call probes, and its success closes the breaker. It
// runs on the real clock (not Options.Now): it measures an outage, not
// limiter time.
type breaker struct {
	threshold int
	cooldown  time.Duration

	open atomic.Bool // fast path: false while Redis answers

	mu       sync.Mutex
	failures int
	until    time.Time // while open: when the next probe may go
	probing  bool
	last     error
}

// allow reports whether a call may go to Redis now.
func (b *breaker) allow() bool {
	if !b.open.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() {
		return true
	}
	if b.probing || time.Now().Before(b.until) {
		return false
	}
	b.probing = true
	return true
}

// record counts the outcome of a call that went to Redis.
func (b *breaker) record(err error) {
	if err == nil {
		if b.open.Load() || b.failuresPending() {
			b.mu.Lock()
			b.failures, b.probing, b.last = 0, false, nil
			b.open.Store(false)
			b.mu.Unlock()
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.last = err
	b.probing = false
	if b.failures >= b.threshold {
		b.until = time.Now().Add(b.cooldown)
		b.open.Store(true)
	}
}

func (b *breaker) failuresPending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures > 0
}

// lastErr returns the error that opened the breaker.
func (b *breaker) lastErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}
