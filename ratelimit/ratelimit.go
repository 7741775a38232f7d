package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// MaxPeriod is the longest Period, and the longest Burst·Interval, of a
// limit under the bucket algorithms (GCRA, TokenBucket, LeakyBucket): 2^53
// nanoseconds, about 104 days. Their durations are then exact in a
// float64, so the Redis store's Lua scripts compute exactly what the Go
// steps compute. The window algorithms accept periods up to MaxWindow.
const MaxPeriod = time.Duration(1 << 53)

// MaxWindow is the longest Period of a limit under the window algorithms
// (FixedWindow, SlidingWindowCounter, SlidingWindowLog): 2^60 nanoseconds,
// about 36.5 years. It holds envoyproxy/ratelimit's longest unit, the year
// of 365 days, many times over, with room for the arithmetic: twice
// MaxWindow (a sliding counter's reset) added to any time before the year
// 2189 still fits an int64 of Unix nanoseconds, and the Redis store's
// scripts carry the longer durations as whole seconds and nanoseconds,
// each exact in a double, so they decide to the nanosecond what the Go
// steps decide.
const MaxWindow = time.Duration(1 << 60)

// MaxRate is the largest Rate (and Burst) a Limit may have: 2^53, the
// largest integer a float64 holds exactly, for the same reason as MaxPeriod.
const MaxRate = 1 << 53

// ErrInvalidLimit is wrapped by every error about a Limit that cannot be
// enforced (a negative rate, a zero period, a rate finer than a nanosecond…).
var ErrInvalidLimit = errors.New("ratelimit: invalid limit")

// ErrInvalidRequest is wrapped by every error about a Request that is not a
// limit problem: a negative cost, an unknown algorithm.
var ErrInvalidRequest = errors.New("ratelimit: invalid request")

// ErrClosed is returned by stores that have been closed.
var ErrClosed = errors.New("ratelimit: store closed")

// Limit is a rate limit: Rate events per Period, with bursts of up to Burst
// events at once.
//
// For the bucket algorithms (GCRA, TokenBucket, LeakyBucket) Burst is the
// capacity of the bucket, refilled continuously at one event every
// Period/Rate. For the window algorithms (FixedWindow, SlidingWindowCounter,
// SlidingWindowLog) the window is Period and it holds Rate events; Burst is
// not used.
//
// The zero Burst means Burst = Rate, so PerSecond(10) admits ten at once and
// ten a second after that. A zero Rate admits nothing: it is the "block
// everything" limit of envoyproxy/ratelimit's requests_per_unit: 0.
type Limit struct {
	Rate   int64         // events per Period; 0 admits nothing
	Period time.Duration // the window, or the time to refill Rate events
	Burst  int64         // the most events admitted at once; 0 means Rate
}

// PerSecond returns a limit of rate events a second, with a burst of rate.
func PerSecond(rate int64) Limit { return Limit{Rate: rate, Period: time.Second, Burst: rate} }

// PerMinute returns a limit of rate events a minute, with a burst of rate.
func PerMinute(rate int64) Limit { return Limit{Rate: rate, Period: time.Minute, Burst: rate} }

// PerHour returns a limit of rate events an hour, with a burst of rate.
func PerHour(rate int64) Limit { return Limit{Rate: rate, Period: time.Hour, Burst: rate} }

// Every returns a limit of one event every interval, with the given burst.
func Every(interval time.Duration, burst int64) Limit {
	return Limit{Rate: 1, Period: interval, Burst: burst}
}

// Normalize returns l with the zero Burst replaced by Rate. Stores apply and
// report normalized limits.
func (l Limit) Normalize() Limit {
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	return l
}

// Validate reports why l cannot be enforced, or nil. The error wraps
// ErrInvalidLimit. Two kinds of limit are valid here that only the window
// algorithms accept, and Request.Validate checks the algorithm: a Rate
// above one event per nanosecond (envoyproxy/ratelimit configs use
// 4294967295 per second for "no real limit"), and a Period longer than
// MaxPeriod, up to MaxWindow (envoyproxy/ratelimit's unit: year).
func (l Limit) Validate() error {
	bad := func(msg string, args ...any) error {
		return fmt.Errorf("%w %v: %s", ErrInvalidLimit, l, fmt.Sprintf(msg, args...))
	}
	switch {
	case l.Rate < 0:
		return bad("rate is negative")
	case l.Burst < 0:
		return bad("burst is negative")
	case l.Rate > MaxRate || l.Burst > MaxRate:
		return bad("rate or burst above 2^53")
	case l.Period <= 0:
		return bad("period must be positive")
	case l.Period > MaxWindow:
		return bad("period is longer than %v", MaxWindow)
	case l.Rate == 0 || l.Rate > int64(l.Period) || l.Period > MaxPeriod:
		// Finer than one event per nanosecond, or longer than the buckets'
		// MaxPeriod: only the window algorithms, which never divide Period
		// by Rate nor use Burst, accept it (Request.Validate).
		return nil
	}
	n := l.Normalize()
	if hi, lo := bits.Mul64(uint64(n.Burst), uint64(n.Interval())); hi != 0 || lo > uint64(MaxPeriod) {
		return bad("burst·interval is longer than %v", MaxPeriod)
	}
	return nil
}

// Interval returns the emission interval Period/Rate, truncated to the
// nanosecond: the time in which one event's worth of capacity comes back.
// It is zero when Rate is zero.
func (l Limit) Interval() time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	return l.Period / time.Duration(l.Rate)
}

// Capacity returns the most events a single request may cost under
// algorithm a: Burst (or Rate when Burst is zero) for the bucket algorithms
// and Rate for the window algorithms. A request costing more is never
// admitted (Decision.Unsatisfiable).
func (l Limit) Capacity(a Algorithm) int64 {
	if l.Rate <= 0 {
		return 0
	}
	if a.Windowed() {
		return l.Rate
	}
	return l.Normalize().Burst
}

// Policy returns the quota and window that describe l under algorithm a, as
// the IETF RateLimit-Policy header advertises them (q and w): a window
// algorithm holds Rate events per Period; a bucket holds Burst events and
// refills completely in Burst·Interval.
func (l Limit) Policy(a Algorithm) (quota int64, window time.Duration) {
	n := l.Normalize()
	if a.Windowed() {
		return n.Rate, n.Period
	}
	return n.Burst, time.Duration(n.Burst) * n.Interval()
}

// String formats l as "10/1s burst 20".
func (l Limit) String() string {
	s := strconv.FormatInt(l.Rate, 10) + "/" + l.Period.String()
	if l.Burst != 0 && l.Burst != l.Rate {
		s += " burst " + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

// Algorithm selects how a Store decides. The zero value is GCRA.
type Algorithm uint8

const (
	// GCRA is the generic cell rate algorithm (virtual scheduling): one
	// timestamp per key. It admits exactly what a token bucket of size Burst
	// refilled continuously at Rate/Period admits, and reports the numbers
	// redis-cell's CL.THROTTLE reports.
	GCRA Algorithm = iota
	// TokenBucket is a bucket of Burst tokens refilled continuously (greedy
	// refill) at Rate per Period. It is computed as GCRA, shares GCRA's state
	// for the same key, and admits exactly what golang.org/x/time/rate admits.
	TokenBucket
	// LeakyBucket is the leaky bucket as a queue: it admits what GCRA admits
	// and sets Decision.Delay to the time until the request's slot, so
	// admitted requests leave at the steady rate, like nginx limit_req without
	// nodelay. Burst bounds the queue. The meter face of the leaky bucket
	// (reject, never delay) is GCRA.
	LeakyBucket
	// FixedWindow counts events in windows of Period aligned to the Unix
	// epoch. Up to 2·Rate events can pass in a short time around a window
	// boundary (Rate at the end of one window, Rate at the start of the
	// next).
	FixedWindow
	// SlidingWindowCounter weights the previous fixed window's count by the
	// part of it still inside the sliding window (Cloudflare's and Figma's
	// formula): prev·(Period−elapsed)/Period + curr. Two counters per key.
	SlidingWindowCounter
	// SlidingWindowLog keeps the time of every admitted event in the last
	// Period: exact, but memory per key grows with Rate (O(Rate)).
	SlidingWindowLog

	numAlgorithms
)

var algorithmNames = [numAlgorithms]string{
	"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log",
}

// Algorithms lists every algorithm, in order.
func Algorithms() []Algorithm {
	out := make([]Algorithm, numAlgorithms)
	for i := range out {
		out[i] = Algorithm(i)
	}
	return out
}

// Valid reports whether a is one of the defined algorithms.
func (a Algorithm) Valid() bool { return a < numAlgorithms }

// Windowed reports whether a counts events in windows of Period
// (FixedWindow, SlidingWindowCounter, SlidingWindowLog) rather than in a
// bucket refilled continuously.
func (a Algorithm) Windowed() bool {
	return a == FixedWindow || a == SlidingWindowCounter || a == SlidingWindowLog
}

// String returns the text form: gcra, token_bucket, leaky_bucket,
// fixed_window, sliding_window_counter or sliding_window_log.
func (a Algorithm) String() string {
	if !a.Valid() {
		return "algorithm(" + strconv.Itoa(int(a)) + ")"
	}
	return algorithmNames[a]
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("%w: unknown algorithm %d", ErrInvalidRequest, a)
	}
	return []byte(algorithmNames[a]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler for the text forms that
// String returns.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// ParseAlgorithm returns the algorithm whose text form is s.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, n := range algorithmNames {
		if n == s {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q (want one of gcra, token_bucket, leaky_bucket, fixed_window, sliding_window_counter, sliding_window_log)", ErrInvalidRequest, s)
}

// Request asks a Store to admit N events for Key under Limit.
type Request struct {
	Key       string
	Limit     Limit
	Algorithm Algorithm
	// N is the cost of the request. N > 1 is a weighted cost; N == 0 peeks:
	// the decision reports the key's state without consuming anything, and
	// is always Allowed.
	N int64
	// MaxDelay applies to LeakyBucket only: a request whose slot is further
	// away than MaxDelay is denied instead of queued. Zero means the queue's
	// own bound (Burst).
	MaxDelay time.Duration
	// Refund gives back N events instead of charging them: what an earlier
	// admitted request of the same Key, Limit and Algorithm was charged,
	// when the work it paid for did not happen (the upstream failed). The
	// buckets get N events' worth of capacity back (TAT − N·interval),
	// never beyond full; the fixed window's count drops by N, the sliding
	// counter's too (the current window's first, then the previous one's),
	// and the sliding log loses N of its newest entries' costs; never
	// below empty. A refund does not know when the charge was made: one
	// that arrives after the charge's window has ended gives back in the
	// current window. The Decision is a peek's after the refund (Allowed,
	// with the Remaining and ResetAfter the key now has). Refund the cost
	// of admitted requests only: a denied request was charged nothing.
	Refund bool
}

// Validate reports why r cannot be applied, or nil.
func (r Request) Validate() error {
	if err := r.Limit.Validate(); err != nil {
		return err
	}
	switch {
	case r.Limit.Period > MaxPeriod && r.Algorithm.Valid() && !r.Algorithm.Windowed():
		return fmt.Errorf("%w %v: period is longer than %v, the longest %v enforces (the window algorithms accept up to %v)", ErrInvalidLimit, r.Limit, MaxPeriod, r.Algorithm, MaxWindow)
	case r.Limit.Rate > int64(r.Limit.Period) && !r.Algorithm.Windowed():
		return fmt.Errorf("%w %v: more than one event per nanosecond (only the window algorithms count that finely)", ErrInvalidLimit, r.Limit)
	case r.N < 0:
		return fmt.Errorf("%w: negative cost %d", ErrInvalidRequest, r.N)
	case !r.Algorithm.Valid():
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidRequest, r.Algorithm)
	case r.MaxDelay < 0:
		return fmt.Errorf("%w: negative max delay %v", ErrInvalidRequest, r.MaxDelay)
	}
	return nil
}

// Decision is a Store's answer to a Request.
type Decision struct {
	// Allowed reports whether the request was admitted (and its cost
	// consumed).
	Allowed bool
	// Limit is the limit that was applied, normalized (Burst filled in).
	Limit Limit
	// Remaining is how many events would be admitted right now, after this
	// request. It is never negative.
	Remaining int64
	// RetryAfter is, when denied, the wait after which the same request
	// would be admitted if nothing else consumed capacity meanwhile. It is
	// zero when the request was allowed, and when it is Unsatisfiable.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its full quota.
	ResetAfter time.Duration
	// Delay is, for an allowed LeakyBucket request, the time the caller must
	// wait before acting: its slot in the queue. It is zero otherwise.
	Delay time.Duration
	// Unsatisfiable reports that the request can never be admitted under
	// this limit: its cost exceeds Limit.Capacity (or the rate is zero). No
	// wait helps; RetryAfter is zero.
	Unsatisfiable bool
}

// Store decides requests and keeps the state they leave behind.
//
// Apply returns a Decision for every valid request; a denial is a Decision
// with Allowed false, never an error. An error means the store failed (it is
// closed, unreachable, or the request is invalid) and says nothing about the
// limit. Implementations are safe for concurrent use.
//
// Keys are stored as given: hash or scrub identifying keys (IP addresses,
// user IDs) first if the store must not hold them in plain text.
type Store interface {
	Apply(ctx context.Context, req Request) (Decision, error)
}

// Binder is implemented by stores that can prepare one algorithm and one
// limit for many requests: validate the limit and derive what every
// decision needs from it once, instead of on each Apply. NewLimiter binds
// when its store is a Binder, so a Limiter's requests take the prepared
// path; callers of Apply are not affected.
type Binder interface {
	Store
	// Bind returns a, limit prepared, or the error Apply would return for
	// a request with that algorithm and limit.
	Bind(a Algorithm, limit Limit) (Bound, error)
}

// Bound decides requests under the algorithm and limit it was bound to.
type Bound interface {
	// Take decides exactly as the store's Apply decides
	// Request{Key: key, Limit: limit, Algorithm: a, N: n, MaxDelay: maxDelay}
	// with the bound a and limit.
	Take(ctx context.Context, key string, n int64, maxDelay time.Duration) (Decision, error)
}

// DurationCeil converts d to whole seconds, rounding up, as HTTP headers
// (Retry-After) need them: 1ns becomes 1.
func DurationCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
