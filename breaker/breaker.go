package breaker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// ErrOpen is matched (errors.Is) by the OpenError a Breaker returns while it
// refuses calls.
var ErrOpen = errors.New("breaker: open")

// State is a breaker's state.
type State uint8

// The states of a Breaker.
const (
	Closed   State = iota // calls pass
	Open                  // calls fail at once
	HalfOpen              // one probe passes; the others fail at once
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Options configures a Breaker. The zero value is the default.
type Options struct {
	// Threshold is the number of failures in a row that opens the breaker.
	// Zero means 5.
	Threshold int
	// Backoff gives the time the breaker stays open on its n-th opening in
	// a row (n from 1), unless the failure's Retry-After is longer. Nil
	// means backoff.Recommended (0.5–1 s, 1–2 s, … up to 60 s).
	Backoff backoff.Strategy
	// OnStateChange, when set, is called on every transition, with the
	// breaker's lock held: it must not call the breaker.
	OnStateChange func(from, to State, now time.Time)
}

// Outcome is the result of a call that Allow let through.
type Outcome uint8

// The outcomes of a call.
const (
	Success Outcome = iota // the call succeeded: resets the failure count
	Failure                // the call failed (throttled, overloaded, timed out)
	Ignore                 // the call says nothing about the target (cancelled, a client error)
)

// Breaker is a circuit breaker. It is safe for concurrent use.
type Breaker struct {
	opts Options

	mu       sync.Mutex
	state    State
	failures int       // failures in a row while closed
	opens    int       // openings in a row without a successful probe
	until    time.Time // while open: when it half-opens
	probing  bool      // while half-open: the probe is out
}

// New returns a closed breaker.
func New(opts Options) *Breaker {
	if opts.Threshold <= 0 {
		opts.Threshold = 5
	}
	if opts.Backoff == nil {
		opts.Backoff = backoff.Recommended()
	}
	return &Breaker{opts: opts}
}

// OpenError is returned by Allow while the breaker refuses calls.
type OpenError struct {
	State State
	Until time.Time     // when the breaker half-opens; zero while a probe is out
	Wait  time.Duration // Until minus now
}

func (e *OpenError) Error() string {
	if e.State == HalfOpen {
		return "breaker: half-open, waiting for the probe"
	}
	return fmt.Sprintf("breaker: open for another %v", e.Wait)
}

// Is reports whether target is ErrOpen.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// Allow reports whether a call may start at now: nil, or an *OpenError. When
// probe is true the call is the half-open breaker's single probe, and its
// outcome decides the breaker's state: the caller must Record it (Ignore
// if the call never happened, to free the probe slot).
func (b *Breaker) Allow(now time.Time) (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return false, nil
	case Open:
		if now.Before(b.until) {
			return false, &OpenError{State: Open, Until: b.until, Wait: b.until.Sub(now)}
		}
		b.set(HalfOpen, now)
		fallthrough
	default: // HalfOpen
		if b.probing {
			return false, &OpenError{State: HalfOpen}
		}
		b.probing = true
		return true, nil
	}
}

// Record reports the outcome of a call Allow let through. probe is what
// Allow returned; retryAfter is the server's delay for a Failure, if it gave
// one. Outcomes of calls that started before the breaker opened are ignored
// while it is open or half-open: only the probe decides.
func (b *Breaker) Record(now time.Time, probe bool, o Outcome, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Closed && !probe {
		return
	}
	if probe {
		b.probing = false
		if b.state != HalfOpen {
			return
		}
	}
	switch o {
	case Success:
		b.failures, b.opens = 0, 0
		if b.state != Closed {
			b.set(Closed, now)
		}
	case Failure:
		b.failures++
		if b.state == HalfOpen || b.failures >= b.opts.Threshold {
			b.opens++
			b.until = now.Add(max(retryAfter, b.opts.Backoff.Delay(b.opens)))
			b.failures = 0
			b.set(Open, now)
		}
	}
}

// State returns the breaker's state at now (an open breaker whose time is up
// reads as half-open).
func (b *Breaker) State(now time.Time) State {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && !now.Before(b.until) {
		return HalfOpen
	}
	return b.state
}

func (b *Breaker) set(to State, now time.Time) {
	from := b.state
	b.state = to
	if from != to && b.opts.OnStateChange != nil {
		b.opts.OnStateChange(from, to, now)
	}
}
