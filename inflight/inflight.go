package inflight

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultTTL is the lifetime of a lease whose Request.TTL is zero.
const DefaultTTL = 30 * time.Second

// MaxTTL is the longest lease lifetime a Request (or a Renew) may ask for.
// Work that lasts longer renews its lease.
const MaxTTL = 24 * time.Hour

// MaxCap is the largest Cap (and Weight): 2^53, the largest integer a
// float64 holds exactly, so that the Redis store's scripts count exactly
// what the memory store counts.
const MaxCap = 1 << 53

// ErrInvalidRequest is wrapped by every error about a Request that cannot
// be decided: a negative cap or weight, a TTL out of range.
var ErrInvalidRequest = errors.New("inflight: invalid request")

// ErrExpired is returned by Renew for a lease the store no longer holds:
// it expired (its slot may have gone to someone else) or was released. The
// work it guarded is no longer counted; the caller should stop it, or
// acquire a new lease.
var ErrExpired = errors.New("inflight: lease expired or released")

// ErrClosed is returned by stores that have been closed.
var ErrClosed = errors.New("inflight: store closed")

// Request asks to enter: to hold Weight of Key's Cap until the work ends
// (Release) or the lease expires after TTL.
type Request struct {
	Key    string        // whose slots: a user, an API key, "fleet"
	Cap    int64         // the most weight in flight at once for Key; 0 admits nothing
	Weight int64         // this request's share of Cap; 0 means 1
	TTL    time.Duration // the lease's lifetime unless renewed; 0 means DefaultTTL
}

// Normalize returns r with the zero Weight and TTL replaced by their
// defaults (1 and DefaultTTL). Stores decide normalized requests.
func (r Request) Normalize() Request {
	if r.Weight == 0 {
		r.Weight = 1
	}
	if r.TTL == 0 {
		r.TTL = DefaultTTL
	}
	return r
}

// Validate reports why r cannot be decided, or nil. The error wraps
// ErrInvalidRequest. A Weight above Cap is valid: it is denied, and the
// Decision says Unsatisfiable.
func (r Request) Validate() error {
	bad := func(msg string) error {
		return fmt.Errorf("%w (key %q): %s", ErrInvalidRequest, r.Key, msg)
	}
	switch {
	case r.Cap < 0:
		return bad("cap is negative")
	case r.Weight < 0:
		return bad("weight is negative")
	case r.Cap > MaxCap || r.Weight > MaxCap:
		return bad("cap or weight above 2^53")
	case r.TTL < 0:
		return bad("ttl is negative")
	case r.TTL > MaxTTL:
		return bad(fmt.Sprintf("ttl is longer than %v", MaxTTL))
	case r.TTL != 0 && r.TTL < time.Millisecond:
		return bad("ttl is shorter than a millisecond")
	}
	return nil
}

// Lease is a holder's claim on Weight of Key's slots, until Release or
// Expiry. It is a plain value: copy it, keep it in a request's context,
// and give it back to the store that made it.
//
// The zero Lease holds nothing: releasing it does nothing, so a caller may
// defer Release right after Acquire, whatever the decision.
type Lease struct {
	Key    string
	ID     uint64    // unique among the store's leases; 0 for a lease that holds nothing
	Weight int64     // the weight it holds
	Expiry time.Time // when the store reclaims it unless renewed (on the store's clock)

	// ref lets the Memory store that made the lease find it without a
	// lookup; a Lease without it (built from the exported fields) works
	// too, by key.
	ref *entry
}

// Held reports whether l holds slots in a store: it came from an admitted
// Acquire. A lease admitted by a failure policy (fail open) holds none.
func (l Lease) Held() bool { return l.ID != 0 }

// Decision is the answer to a Request.
type Decision struct {
	Allowed bool
	// InFlight is the weight in flight for the key after the decision
	// (including this request's when it was admitted), after the store
	// reclaimed expired leases.
	InFlight int64
	// Cap is the request's cap.
	Cap int64
	// RetryAfter, when denied, is the time until the earliest lease of the
	// key expires: the latest a slot can come back without a Release or a
	// Renew (a release frees one sooner; a renewal, later). Zero when
	// allowed, or when the request can never be admitted.
	RetryAfter time.Duration
	// Unsatisfiable is true when the request weighs more than the cap, so
	// it is never admitted.
	Unsatisfiable bool
}

// Remaining returns the weight still free under the cap after the
// decision.
func (d Decision) Remaining() int64 { return max(0, d.Cap-d.InFlight) }

// Store holds the leases of many keys. Implementations are safe for
// concurrent use.
//
// A denial is a Decision, not an error: an error means the store could not
// decide (unreachable, closed, an invalid request) and its failure policy
// said to report it.
type Store interface {
	// Acquire enters req.Key if the weight in flight (after reclaiming
	// expired leases) plus req's weight is at most req.Cap. When allowed,
	// the Lease holds req's weight until Release or its Expiry.
	Acquire(ctx context.Context, req Request) (Lease, Decision, error)
	// Release gives back l's slots. Releasing a lease that expired, that
	// was released already, whose fields were altered, or the zero Lease
	// does nothing and is not an error: it never frees another holder's
	// slots.
	Release(ctx context.Context, l Lease) error
	// Renew extends l to expire ttl from now (0 means DefaultTTL) and
	// returns the renewed lease. It returns ErrExpired when the store no
	// longer holds l. A lease that holds nothing (zero ID) is returned
	// with its new expiry.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Peek returns the weight in flight for key (expired leases not
	// counted) without entering.
	Peek(ctx context.Context, key string) (int64, error)
}

// ValidTTL returns ttl with the zero value replaced by DefaultTTL, or an
// error wrapping ErrInvalidRequest when it is out of range (negative,
// under a millisecond, above MaxTTL). Stores use it for Renew.
func ValidTTL(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return DefaultTTL, nil
	case ttl < time.Millisecond:
		return 0, fmt.Errorf("%w: ttl %v is not at least a millisecond", ErrInvalidRequest, ttl)
	case ttl > MaxTTL:
		return 0, fmt.Errorf("%w: ttl %v is longer than %v", ErrInvalidRequest, ttl, MaxTTL)
	}
	return ttl, nil
}
