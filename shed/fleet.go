package shed

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// DefaultFleetKey is the in-flight key of a Fleet shedder whose Key is "".
const DefaultFleetKey = "sluice:fleet"

// FleetOptions configure a Fleet shedder. Store and Cap are required; the
// zero value of every other field is its documented default.
type FleetOptions struct {
	// Store holds the fleet's leases: an inflight.Memory for one process,
	// a Redis store (inflight/redisinflight) for a fleet of processes
	// sharing one cap.
	Store inflight.Store
	// Key is the one in-flight key the fleet shares. "" means
	// DefaultFleetKey.
	Key string
	// Cap is the most requests in flight across the fleet. Required.
	Cap int64
	// Reserved is the share of Cap kept for critical requests (Stripe
	// keeps some workers for its critical requests, e.g. creating
	// charges): the other classes may hold at most
	// floor(Cap × (1 − Reserved)) slots between them, the critical ones
	// all of Cap. 0 (the default) reserves nothing; it is below 1.
	Reserved float64
	// Classes is the class order (see NewClasses); zero means
	// DefaultClasses.
	Classes Classes
	// Critical is how many classes, at the end of the order, are
	// critical. Zero means 1: the last class.
	Critical int
	// TTL is the lifetime of a lease unless renewed: a process that dies
	// holding leases gives its slots back after TTL. Zero means
	// inflight.DefaultTTL.
	TTL time.Duration
}

// Fleet is a fleet usage load shedder (Stripe's layer 3): one in-flight
// cap shared by every process that uses the same Store and Key, with a
// share of it reserved for critical requests. It is the concurrent
// requests limiter with one global key.
//
// Fleet is safe for concurrent use; its state is the Store's. A request
// that holds its slot with Enter and Leave has its lease renewed by the
// Fleet's one renewer (see Enter); Close stops it.
type Fleet struct {
	store        inflight.Store
	key          string
	cap, general int64
	firstCrit    Class
	classes      Classes
	ttl          time.Duration
	held         held // the leases of Enter's requests, and their renewer
}

// NewFleet returns a Fleet shedder, or an error wrapping ErrOptions.
func NewFleet(o FleetOptions) (*Fleet, error) {
	if o.Key == "" {
		o.Key = DefaultFleetKey
	}
	if o.Classes.Len() == 0 {
		o.Classes, _ = NewClasses()
	}
	if o.Critical == 0 {
		o.Critical = 1
	}
	bad := func(format string, args ...any) (*Fleet, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...)
	}
	switch {
	case o.Store == nil:
		return bad("fleet shedder without a store")
	case o.Cap <= 0 || o.Cap > inflight.MaxCap:
		return bad("fleet cap %d: want 1 to 2^53", o.Cap)
	case !(o.Reserved >= 0 && o.Reserved < 1):
		return bad("reserved share %v: want at least 0 and below 1", o.Reserved)
	case o.Critical < 0 || o.Critical > o.Classes.Len():
		return bad("%d critical classes of %d", o.Critical, o.Classes.Len())
	}
	if _, err := inflight.ValidTTL(o.TTL); err != nil {
		return bad("%v", err)
	}
	f := &Fleet{store: o.Store, key: o.Key, cap: o.Cap, classes: o.Classes, ttl: o.TTL,
		firstCrit: Class(o.Classes.Len() - o.Critical)}
	f.general = GeneralCap(o.Cap, o.Reserved)
	return f, nil
}

// GeneralCap is the part of cap that non-critical requests may hold when
// reserved is kept for critical ones: floor(cap × (1 − reserved)),
// computed so that a reserve of 0.2 of 10 leaves 8, not 7 (0.8 × 10 is
// 7.999… in floating point).
func GeneralCap(cap int64, reserved float64) int64 {
	g := math.Floor(float64(cap)*(1-reserved) + 1e-9)
	return min(max(int64(g), 0), cap)
}

// Critical reports whether class c may use the reserve.
func (f *Fleet) Critical(c Class) bool { return c >= f.firstCrit }

// CapFor returns the cap that requests of class c are held to.
func (f *Fleet) CapFor(c Class) int64 {
	if f.Critical(c) {
		return f.cap
	}
	return f.general
}

// Classes returns the class order.
func (f *Fleet) Classes() Classes { return f.classes }

// Acquire enters the fleet key for a request of class c: it is admitted
// if the fleet's in-flight count is below CapFor(c). Release the lease
// when the request ends (releasing a denied, zero lease does nothing). An
// error is the store's: it could not decide and its failure policy said
// to report it.
func (f *Fleet) Acquire(ctx context.Context, c Class) (inflight.Lease, inflight.Decision, error) {
	return f.store.Acquire(ctx, inflight.Request{Key: f.key, Cap: f.CapFor(c), Weight: 1, TTL: f.ttl})
}

// Release gives l's slot back.
func (f *Fleet) Release(ctx context.Context, l inflight.Lease) error { return f.store.Release(ctx, l) }

// Renew extends l to expire ttl from now (0: the shedder's TTL), for
// requests that outlive their lease.
func (f *Fleet) Renew(ctx context.Context, l inflight.Lease, ttl time.Duration) (inflight.Lease, error) {
	if ttl == 0 {
		ttl = f.ttl
	}
	return f.store.Renew(ctx, l, ttl)
}

// TTL returns the lease lifetime (inflight.DefaultTTL when it was zero).
func (f *Fleet) TTL() time.Duration {
	if f.ttl == 0 {
		return inflight.DefaultTTL
	}
	return f.ttl
}

// InFlight returns the fleet's in-flight count.
func (f *Fleet) InFlight(ctx context.Context) (int64, error) { return f.store.Peek(ctx, f.key) }
