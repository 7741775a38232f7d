package redisinflight

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
)

// MinTTLWithNow is the shortest lifetime of keys written with Options.Now
// set: Redis expires keys on its own clock, which a simulated clock does
// not follow.
const MinTTLWithNow = redislink.MinTTLWithNow

// The errors of calls that Redis did not decide.
var (
	// ErrUnavailable is wrapped by the errors of calls Redis could not
	// answer: unreachable, timed out, a Cluster slot without its node, or
	// the breaker open after such failures.
	ErrUnavailable = errors.New("redisinflight: redis unavailable")
	// ErrScript is wrapped by errors about a script's reply or a script
	// error reported by Redis: a bug or an incompatible server, not an
	// outage.
	ErrScript = errors.New("redisinflight: script failed")
)

// Options configures a Store. The zero value is a good default: Redis's
// clock, 100 ms per call, errors returned to the caller.
type Options struct {
	// Prefix is prepended to every Redis key. Default "sluice:". It must
	// not contain "{" or "}": the store hash-tags keys itself.
	Prefix string
	// Now, when set, replaces the Redis server's clock (TIME): the time
	// is read in the process and passed to the scripts. Set it for tests
	// and simulations; in production every instance should use Redis's
	// clock, so that they agree on when a lease expires. With Now set,
	// keys also live at least MinTTLWithNow in Redis.
	Now func() time.Time
	// Timeout bounds each call's wait for Redis. Default 100 ms. A call
	// that timed out may still have been applied by Redis: an Acquire
	// then holds a slot that nobody will release, until its TTL.
	Timeout time.Duration
	// OnError is what Acquire does when Redis cannot decide
	// (ErrUnavailable, ErrScript): ratelimit.FailError (the zero value)
	// returns the error; FailAllow admits with a lease that holds
	// nothing; FailDeny denies, with RetryAfter equal to
	// BreakerCooldown (with Link, the rate limit store's); FailLocal falls back to an in-process
	// inflight.Memory applying the same caps (n instances admit up to n
	// times the cap), whose leases Release and Renew then go to. Peek
	// falls back to the local store under FailLocal. Release and Renew
	// of a lease Redis holds return the error under every policy: the
	// lease cannot be given back elsewhere, and its TTL reclaims it.
	OnError ratelimit.FailurePolicy
	// Link, when set, is the link of the rate limit store on the same
	// Redis (redisstore.Store.Link): its breakers (one per Cluster
	// primary, named by the slot map that store reads), its callers'
	// trials and its background prober then hold for both stores, and
	// the Breaker options below are that store's. Nil: the store has a
	// link of its own, one breaker for the whole Redis, that they
	// configure.
	Link *redislink.Link
	// BreakerThreshold is the number of consecutive failed calls that
	// opens the breaker: while it is open, calls fail at once with
	// ErrUnavailable, without waiting for Redis, but for one call per
	// BreakerTrial, which goes through: its success closes the breaker.
	// Default 3; negative disables the breaker.
	BreakerThreshold int
	// BreakerTrial is the least time between two calls that try Redis
	// while the breaker is open: decisions go back to Redis within about
	// BreakerTrial (plus a round trip) after it answers again. Default
	// (and when negative: this store has no background prober) 100 ms.
	BreakerTrial time.Duration
	// BreakerCooldown is the RetryAfter of FailDeny's denials. Default
	// 1 s.
	BreakerCooldown time.Duration
	// Local configures the inflight.Memory of the FailLocal policy (its
	// Now is set to this Options' Now).
	Local inflight.MemoryOptions
	// OnFailure, when set, is called with every failed call to Redis while
	// the breaker is closed (not with the failed trials while it is open),
	// for logging and metrics. It must not block.
	OnFailure func(error)
}

// Store is an inflight.Store keeping leases in Redis (standalone or
// Cluster). It is safe for concurrent use.
type Store struct {
	client rueidis.Client
	opts   Options
	minTTL string // ms
	local  *inflight.Memory
	closed atomic.Bool

	link   *redislink.Link
	shared bool // link is a rate limit store's
	policy atomic.Uint64
}

var _ inflight.Store = (*Store)(nil)

//go:embed lua/*.lua
var luaFS embed.FS

func source(name string) string {
	pre, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	step, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return string(pre) + "\n" + string(step)
}

var (
	acquireScript = rueidis.NewLuaScript(source("acquire.lua"))
	releaseScript = rueidis.NewLuaScript(source("release.lua"))
	renewScript   = rueidis.NewLuaScript(source("renew.lua"))
	peekScript    = rueidis.NewLuaScript(source("peek.lua"))
)

// Script returns the Lua source of the script named acquire, release,
// renew or peek (prelude included), for review; "" for another name.
func Script(name string) string {
	switch name {
	case "acquire", "release", "renew", "peek":
		return source(name + ".lua")
	}
	return ""
}

// New returns a Store using client, which stays the caller's: Close does
// not close it. A rueidis cluster client makes a Cluster store (every
// script touches two keys of one hash slot).
func New(client rueidis.Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisinflight: nil client")
	}
	base := redislink.Base{Prefix: opts.Prefix, Timeout: opts.Timeout, OnError: opts.OnError, Now: opts.Now != nil}
	if err := base.Check("redisinflight"); err != nil {
		return nil, err
	}
	opts.Prefix, opts.Timeout = base.Prefix, base.Timeout
	s := &Store{client: client, opts: opts, minTTL: strconv.FormatInt(base.MinTTL(), 10), link: opts.Link, shared: opts.Link != nil}
	if s.link == nil {
		if opts.BreakerTrial < 0 {
			opts.BreakerTrial = 0 // the default: nothing else would close the breaker
		}
		s.link = redislink.New(redislink.Options{Threshold: opts.BreakerThreshold, Cooldown: opts.BreakerCooldown,
			Trial: opts.BreakerTrial, Unavailable: ErrUnavailable})
	}
	if opts.OnError == ratelimit.FailLocal {
		lo := opts.Local
		lo.Now = opts.Now
		s.local = inflight.NewMemory(lo)
	}
	return s, nil
}

// Close closes the local fallback store; the client stays the caller's.
// Calls return inflight.ErrClosed afterwards. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.local != nil {
		s.local.Close()
	}
	return nil
}

// Keys returns the two Redis keys holding key's leases: the sorted set of
// leases and the sum of their weights. Deleting both drops every lease of
// the key.
func (s *Store) Keys(key string) (leases, total string) {
	// The tag starts with "k" so that it is never empty (an empty tag,
	// "{}", would hash each whole key, and the two to different slots).
	tag := "{k" + key + "}"
	return s.opts.Prefix + "if" + tag, s.opts.Prefix + "iw" + tag
}

// localBit marks the IDs of leases the local fallback store made.
const localBit = 1 << 63

// member is a lease's sorted-set member: its ID in 16 hex digits, a
// colon, its weight.
func member(id uint64, weight int64) string {
	b := make([]byte, 0, 16+1+20)
	const hex = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hex[id>>uint(i)&15])
	}
	b = append(b, ':')
	return string(strconv.AppendInt(b, weight, 10))
}

// now returns ARGV[1]: the client's time in Unix microseconds, or "" for
// Redis's clock.
func (s *Store) now() string {
	if s.opts.Now == nil {
		return ""
	}
	return strconv.FormatInt(s.opts.Now().UnixMicro(), 10)
}

// Acquire implements inflight.Store.
func (s *Store) Acquire(ctx context.Context, req inflight.Request) (inflight.Lease, inflight.Decision, error) {
	if err := req.Validate(); err != nil {
		return inflight.Lease{}, inflight.Decision{}, err
	}
	if s.closed.Load() {
		return inflight.Lease{}, inflight.Decision{}, inflight.ErrClosed
	}
	req = req.Normalize()
	d := inflight.Decision{Cap: req.Cap}
	id := rand.Uint64() &^ localBit
	for id == 0 {
		id = rand.Uint64() &^ localBit
	}
	m := member(id, req.Weight)
	z, w := s.Keys(req.Key)
	reply, err := s.exec(ctx, acquireScript, []string{z, w}, []string{s.now(), s.minTTL,
		strconv.FormatInt(req.Cap, 10), strconv.FormatInt(req.Weight, 10),
		strconv.FormatInt(req.TTL.Microseconds(), 10), m})
	if err != nil {
		if ctx.Err() != nil {
			return inflight.Lease{}, inflight.Decision{}, err // the caller gave up: no policy applies
		}
		return s.fallback(ctx, req, err)
	}
	v, err := ints(reply, 3)
	if err != nil {
		return s.fallback(ctx, req, s.failed(err))
	}
	d.InFlight = v[1]
	switch {
	case v[0] == 1:
		d.Allowed = true
		return inflight.Lease{Key: req.Key, ID: id, Weight: req.Weight, Expiry: time.UnixMicro(v[2])}, d, nil
	case req.Weight > req.Cap:
		d.Unsatisfiable = true
	default:
		d.RetryAfter = time.Duration(v[2]) * time.Microsecond
	}
	return inflight.Lease{}, d, nil
}

// fallback applies the failure policy to req after err.
func (s *Store) fallback(ctx context.Context, req inflight.Request, err error) (inflight.Lease, inflight.Decision, error) {
	s.policy.Add(1)
	d := inflight.Decision{Cap: req.Cap}
	switch s.opts.OnError {
	case ratelimit.FailAllow:
		if req.Weight > req.Cap {
			d.Unsatisfiable = true
			return inflight.Lease{}, d, nil
		}
		d.Allowed, d.InFlight = true, req.Weight
		exp := time.Now()
		if s.opts.Now != nil {
			exp = s.opts.Now()
		}
		return inflight.Lease{Key: req.Key, Weight: req.Weight, Expiry: exp.Add(req.TTL)}, d, nil
	case ratelimit.FailDeny:
		d.Unsatisfiable = req.Weight > req.Cap
		if !d.Unsatisfiable {
			d.RetryAfter = s.link.Cooldown()
		}
		return inflight.Lease{}, d, nil
	case ratelimit.FailLocal:
		l, d, err := s.local.Acquire(ctx, req)
		if l.ID != 0 {
			l.ID |= localBit
		}
		return l, d, err
	}
	return inflight.Lease{}, inflight.Decision{}, err
}

// Release implements inflight.Store.
func (s *Store) Release(ctx context.Context, l inflight.Lease) error {
	if l.ID == 0 {
		return nil
	}
	if s.closed.Load() {
		return inflight.ErrClosed
	}
	if l.ID&localBit != 0 {
		if s.local == nil {
			return nil // not one of this store's: it holds nothing here
		}
		l.ID &^= localBit
		return s.local.Release(ctx, l)
	}
	if l.Weight <= 0 || l.Weight > inflight.MaxCap {
		return nil // no lease of this store has such a weight
	}
	z, w := s.Keys(l.Key)
	reply, err := s.exec(ctx, releaseScript, []string{z, w}, []string{"0", s.minTTL, member(l.ID, l.Weight)})
	if err != nil {
		return err
	}
	if _, err := reply.AsInt64(); err != nil {
		return s.failed(fmt.Errorf("%w: release replied %v", ErrScript, err))
	}
	return nil
}

// Renew implements inflight.Store.
func (s *Store) Renew(ctx context.Context, l inflight.Lease, ttl time.Duration) (inflight.Lease, error) {
	ttl, err := inflight.ValidTTL(ttl)
	if err != nil {
		return inflight.Lease{}, err
	}
	if s.closed.Load() {
		return inflight.Lease{}, inflight.ErrClosed
	}
	if l.ID == 0 {
		exp := time.Now()
		if s.opts.Now != nil {
			exp = s.opts.Now()
		}
		l.Expiry = exp.Add(ttl)
		return l, nil
	}
	if l.ID&localBit != 0 {
		if s.local == nil {
			return inflight.Lease{}, inflight.ErrExpired
		}
		l.ID &^= localBit
		r, err := s.local.Renew(ctx, l, ttl)
		if err == nil {
			r.ID |= localBit
		}
		return r, err
	}
	if l.Weight <= 0 || l.Weight > inflight.MaxCap {
		return inflight.Lease{}, inflight.ErrExpired
	}
	z, w := s.Keys(l.Key)
	reply, err := s.exec(ctx, renewScript, []string{z, w}, []string{s.now(), s.minTTL,
		strconv.FormatInt(ttl.Microseconds(), 10), member(l.ID, l.Weight)})
	if err != nil {
		return inflight.Lease{}, err
	}
	exp, err := reply.AsInt64()
	if err != nil {
		return inflight.Lease{}, s.failed(fmt.Errorf("%w: renew replied %v", ErrScript, err))
	}
	if exp == 0 {
		return inflight.Lease{}, inflight.ErrExpired
	}
	l.Expiry = time.UnixMicro(exp)
	return l, nil
}

// Peek implements inflight.Store.
func (s *Store) Peek(ctx context.Context, key string) (int64, error) {
	if s.closed.Load() {
		return 0, inflight.ErrClosed
	}
	z, w := s.Keys(key)
	reply, err := s.exec(ctx, peekScript, []string{z, w}, []string{s.now(), s.minTTL})
	if err == nil {
		var n int64
		if n, err = reply.AsInt64(); err == nil {
			return n, nil
		}
		err = s.failed(fmt.Errorf("%w: peek replied %v", ErrScript, err))
	}
	if s.opts.OnError == ratelimit.FailLocal && ctx.Err() == nil {
		return s.local.Peek(ctx, key)
	}
	return 0, err
}

// exec runs script within the timeout, through the breaker of the node
// serving keys (one slot).
func (s *Store) exec(ctx context.Context, script *rueidis.Lua, keys, args []string) (rueidis.RedisMessage, error) {
	node := s.node(keys[0])
	if _, err := node.Allow(); err != nil {
		if s.shared {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return rueidis.RedisMessage{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	res := script.Exec(cctx, s.client, keys, args)
	msg, err := res.ToMessage()
	if err != nil {
		if ctx.Err() != nil {
			return msg, ctx.Err() // the caller gave up: not Redis's failure
		}
		return msg, s.failedAt(node, s.classify(err))
	}
	node.OK()
	return msg, nil
}

// node returns the breaker of the node serving key: the link's Whole but
// on a Cluster whose slot map the link knows.
func (s *Store) node(key string) *redislink.Node {
	if s.client.Mode() != rueidis.ClientModeCluster {
		return s.link.Whole()
	}
	_, n := s.link.For(redislink.Slot(key))
	return n
}

// failed counts a failed call to the node of the whole Redis (a reply
// that does not parse), and returns err.
func (s *Store) failed(err error) error { return s.failedAt(s.link.Whole(), err) }

// failedAt counts a failed call to node, which opens its breaker at the
// threshold, and returns err; OnFailure has it unless the breaker was
// open (a failed trial).
func (s *Store) failedAt(node *redislink.Node, err error) error {
	open := node.Open()
	node.Fail(err, false)
	if !open && s.opts.OnFailure != nil {
		s.opts.OnFailure(err)
	}
	return err
}

// Health returns the state of the store's link to Redis (the rate limit
// store's, with Options.Link).
func (s *Store) Health() redislink.Health { return s.link.Health() }

// Stats are a Store's counters since it was made.
type Stats struct {
	// PolicyAnswers is the number of Acquire calls Options.OnError
	// answered: Redis could not decide (a failed call, or the breaker
	// open).
	PolicyAnswers uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats { return Stats{PolicyAnswers: s.policy.Load()} }

func (s *Store) classify(err error) error {
	return redislink.Classify(err, s.opts.Timeout, ErrUnavailable, ErrScript, "")
}

// ints reads a reply of n integers.
func ints(m rueidis.RedisMessage, n int) ([]int64, error) {
	arr, err := m.ToArray()
	if err != nil || len(arr) != n {
		return nil, fmt.Errorf("%w: want %d integers, got %v (%v)", ErrScript, n, m, err)
	}
	out := make([]int64, n)
	for i := range arr {
		if out[i], err = arr[i].AsInt64(); err != nil {
			return nil, fmt.Errorf("%w: reply %d: %v", ErrScript, i, err)
		}
	}
	return out, nil
}
