package httpclient

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/breaker"
)

// Observer receives the Events of a Transport.
type Observer interface {
	Observe(Event)
}

// ObserverFunc is an adapter to allow the use of ordinary functions as an
// Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event.
const (
	// Attempt: an attempt ended. Status (0 without a response), Signal,
	// Latency, Err, and Delay for the answer's Retry-After.
	Attempt EventKind = iota
	// Retry: a retry is about to wait Delay (ServerDelay if it is the
	// server's Retry-After). Err is the failed attempt's error.
	Retry
	// Wait: an attempt waited Delay for its host (pause, slot, token).
	Wait
	// Pause: the host paused for Delay after a 429/503.
	Pause
	// BreakerChange: the host's breaker went From → To.
	BreakerChange
	// GiveUp: a request failed for good with Err.
	GiveUp
)

var kindNames = [...]string{"attempt", "retry", "wait", "pause", "breaker", "give-up"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is something a Transport did or saw. Fields that do not apply to
// its Kind are zero.
type Event struct {
	Kind        EventKind
	Host        string
	Method, URL string
	Attempt     int
	Status      int
	Signal      adaptive.Signal
	Latency     time.Duration
	Delay       time.Duration
	ServerDelay bool
	From, To    breaker.State
	Err         error
	// Robots marks the events of a robots.txt fetch the Transport made
	// itself (Options.Robots), not one the caller asked for.
	Robots bool
}

func (t *Transport) observe(e Event) {
	if t.o.Observer != nil {
		t.o.Observer.Observe(e)
	}
}
