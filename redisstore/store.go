package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// Defaults for the zero Options.
const (
	DefaultPrefix           = "sluice:"
	DefaultTimeout          = 100 * time.Millisecond
	DefaultBreakerThreshold = 3
	DefaultBreakerCooldown  = time.Second
	DefaultMaxBatch         = 128
	DefaultPipeline         = 2
	DefaultClusterPipeline  = 2
	DefaultDenyCacheSize    = 1 << 16
)

// ErrUnavailable is wrapped by the errors Apply returns when Redis could not
// decide: unreachable, timed out, a cluster slot without its node, or the
// breaker open after such failures.
var ErrUnavailable = errors.New("redisstore: redis unavailable")

// ErrScript is wrapped by errors about a script's reply or a script error
// reported by Redis. They mean a bug or an incompatible server, not an
// outage.
var ErrScript = errors.New("redisstore: script failed")

// Policy is what Apply does when Redis cannot decide (ErrUnavailable or
// ErrScript).
type Policy uint8

const (
	// ReturnError (the zero value) returns the error: the caller decides,
	// for example with a 503, or by choosing a policy per route.
	ReturnError Policy = iota
	// Allow fails open: every request is admitted while Redis is
	// unreachable (Stripe's choice). The decision reports Remaining 0.
	Allow
	// Deny fails closed: every request is denied, with RetryAfter equal to
	// the breaker's cooldown.
	Deny
	// Local falls back to an in-process memstore applying the same limits,
	// so each instance enforces the limit on its own while Redis is away
	// (n instances admit up to n times the limit), and goes back to Redis
	// when it answers again. The local state starts empty and is not copied
	// to Redis.
	Local
)

var policyNames = [...]string{"error", "allow", "deny", "local"}

// String returns error, allow, deny or local.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", p)
}

// ParsePolicy returns the policy named error, allow, deny or local.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("redisstore: unknown failure policy %q (want error, allow, deny or local)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (p Policy) MarshalText() ([]byte, error) {
	if int(p) >= len(policyNames) {
		return nil, fmt.Errorf("redisstore: unknown failure policy %d", p)
	}
	return []byte(policyNames[p]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// Options configures a Store. The zero value is a good default: Redis's
// clock, 100 ms per call, errors returned to the caller.
type Options struct {
	// Prefix is prepended to every Redis key. Default "sluice:". It must not
	// contain "{" or "}": sluice hash-tags keys itself.
	Prefix string
	// Now, when set, replaces the Redis server's clock (TIME): the time is
	// read in the process and passed to the scripts. Set it for tests and
	// simulations; in production every instance should use Redis's clock so
	// that they agree. With Now set, keys also live at least MinTTLWithNow
	// in Redis, since Redis expires them on its own clock.
	Now func() time.Time
	// Timeout bounds each Apply's wait for Redis, queueing included (it is
	// checked every Timeout/4, so a wait may last 1.25·Timeout). Default
	// 100 ms. A request that timed out may still be counted by Redis when
	// its batch runs late.
	Timeout time.Duration
	// OnError is what Apply does when Redis cannot decide. Default
	// ReturnError.
	OnError Policy
	// BreakerThreshold is the number of consecutive failed calls that opens
	// the breaker: while it is open, Apply applies OnError at once, without
	// calling Redis, and once every BreakerCooldown one call probes Redis;
	// its success closes the breaker. Default 3; negative disables the
	// breaker.
	BreakerThreshold int
	// BreakerCooldown is how long the breaker stays open before a probe.
	// Default 1 s.
	BreakerCooldown time.Duration
	// DenyCache, when true, remembers denials in process: a key denied with
	// RetryAfter d is denied locally for d, without a round trip, for
	// requests costing at least as much. See the package documentation for
	// its accuracy. Off by default.
	DenyCache bool
	// DenyCacheSize bounds the denials remembered. Default 65536.
	DenyCacheSize int
	// MaxBatch is the most requests one script call decides. Default 128;
	// 1 disables batching.
	MaxBatch int
	// Pipeline is the most script calls in flight at once. Default 2, on
	// a standalone server and on a Cluster (DefaultClusterPipeline): the
	// requests that arrive while a call is in flight go together in the
	// next, and a second call goes out while one is in flight only with
	// at least a quarter of MaxBatch, so that the client and redis-server
	// work at once without making batches small, which costs more CPU
	// per decision on both sides (docs/bench-redis.md). A lone request
	// goes out at once.
	Pipeline int
	// OnFailure, when set, is called with every failed call to Redis (a
	// batch of requests), for logging and metrics. It must not block.
	OnFailure func(error)
	// Local configures the memstore of the Local policy (its Now is set to
	// this Options' Now).
	Local memstore.Options
	// TLSConfig, when set, is the TLS configuration of Open's rediss:// and
	// rediss-cluster:// connections (a private CA's roots, client
	// certificates). Nil means the system's roots.
	TLSConfig *tls.Config
}

// MinTTLWithNow is the shortest expiry of a key written with Options.Now
// set: Redis expires keys on its own clock, which a simulated clock does not
// follow.
const MinTTLWithNow = 10 * time.Minute

// Store is a ratelimit.Store keeping limiter state in Redis (standalone or
// Cluster). It is safe for concurrent use. Close releases it.
type Store struct {
	client  rueidis.Client
	own     bool
	cluster bool
	opts    Options
	minTTL  int64 // ms
	scripts [numShapes]*rueidis.Lua
	batch   *batcher
	brk     breaker
	deny    *denyCache
	local   *memstore.Store
	closed  atomic.Bool
	calls   sync.Pool // of *call
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store using client, which stays the caller's: Close does not
// close it. A rueidis cluster client makes a Cluster store. New loads the
// scripts into every node it knows, within ctx (and at most a second or
// Timeout); a node that cannot take them then is not an error: the first
// call loads them.
func New(ctx context.Context, client rueidis.Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	s, err := newStore(client, false, opts)
	if err != nil {
		return nil, err
	}
	s.preload(ctx)
	return s, nil
}

// preload sends SCRIPT LOAD for every script to every node, so that the
// first decisions do not pay for NOSCRIPT and EVAL.
func (s *Store) preload(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.opts.Timeout, time.Second))
	defer cancel()
	for _, node := range s.client.Nodes() {
		cmds := make(rueidis.Commands, 0, len(scriptSources))
		for _, src := range scriptSources {
			cmds = append(cmds, node.B().ScriptLoad().Script(src).Build())
		}
		node.DoMulti(ctx, cmds...)
	}
}

func newStore(client rueidis.Client, own bool, opts Options) (*Store, error) {
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q contains a brace", opts.Prefix)
	}
	if int(opts.OnError) >= len(policyNames) {
		return nil, fmt.Errorf("redisstore: unknown failure policy %d", opts.OnError)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.BreakerThreshold == 0 {
		opts.BreakerThreshold = DefaultBreakerThreshold
	}
	if opts.BreakerCooldown <= 0 {
		opts.BreakerCooldown = DefaultBreakerCooldown
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Pipeline <= 0 {
		opts.Pipeline = DefaultPipeline
		if client.Mode() == rueidis.ClientModeCluster {
			opts.Pipeline = DefaultClusterPipeline
		}
	}
	if opts.DenyCacheSize <= 0 {
		opts.DenyCacheSize = DefaultDenyCacheSize
	}
	s := &Store{
		client:  client,
		own:     own,
		cluster: client.Mode() == rueidis.ClientModeCluster,
		opts:    opts,
		minTTL:  1,
		scripts: newScripts(),
	}
	if opts.Now != nil {
		s.minTTL = MinTTLWithNow.Milliseconds()
	}
	s.brk.threshold = opts.BreakerThreshold
	if opts.BreakerThreshold < 0 {
		s.brk.threshold = int(^uint(0) >> 1)
	}
	s.brk.cooldown = opts.BreakerCooldown
	if opts.DenyCache {
		s.deny = newDenyCache(opts.DenyCacheSize)
	}
	if opts.OnError == Local {
		lo := opts.Local
		lo.Now = opts.Now
		s.local = memstore.New(lo)
	}
	s.calls.New = func() any { return &call{done: make(chan struct{}, 1)} }
	s.batch = newBatcher(s, opts.Pipeline, opts.MaxBatch, opts.Timeout)
	return s, nil
}

// Open connects to the Redis at rawURL and returns a Store that owns the
// connection (Close closes it):
//
//	redis://[user:password@]host:port[/db]      standalone
//	rediss://[user:password@]host:port[/db]     standalone over TLS
//	redis-cluster://[user:password@]host:port,host:port,…  Redis Cluster
//	rediss-cluster://…                            Redis Cluster over TLS
//
// Query parameters of rueidis.ParseURL (dial_timeout, …) are accepted for
// redis:// and rediss://. Open fails when no server answers.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	co, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	co.DisableCache = true
	if co.TLSConfig != nil && opts.TLSConfig != nil {
		tc := opts.TLSConfig.Clone()
		if tc.ServerName == "" {
			tc.ServerName = co.TLSConfig.ServerName
		}
		co.TLSConfig = tc
	}
	if co.Dialer.Timeout == 0 {
		// rueidis waits this long for a connection's handshake whatever the
		// call's context says; the default (5 s) would hold a worker that
		// long while Redis restarts.
		co.Dialer.Timeout = max(opts.Timeout, time.Second)
	}
	client, err := rueidis.NewClient(co)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to %s: %v", ErrUnavailable, redactURL(rawURL), err)
	}
	s, err := newStore(client, true, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.preload(ctx)
	return s, nil
}

func parseURL(raw string) (rueidis.ClientOption, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	switch scheme {
	case "redis", "rediss", "unix":
		co, err := rueidis.ParseURL(raw)
		if err != nil {
			return co, fmt.Errorf("redisstore: URL %q: %v", redactURL(raw), err)
		}
		return co, nil
	case "redis-cluster", "rediss-cluster":
	default:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: want redis://, rediss://, unix://, redis-cluster:// or rediss-cluster://", redactURL(raw))
	}
	single := strings.TrimSuffix(scheme, "-cluster")
	// redis-cluster://user:pass@h1:p1,h2:p2/?… : net/url cannot parse a
	// host list, so split it off and parse the rest as redis://.
	userinfo := ""
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo, rest = rest[:at+1], rest[at+1:]
	}
	hosts, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hosts, tail = rest[:i], rest[i:]
	}
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			addrs = append(addrs, h)
		}
	}
	if len(addrs) == 0 {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: no host", redactURL(raw))
	}
	co, err := rueidis.ParseURL(single + "://" + userinfo + addrs[0] + tail)
	if err != nil {
		return co, fmt.Errorf("redisstore: URL %q: %v", redactURL(raw), err)
	}
	co.InitAddress = addrs
	co.SelectDB = 0 // a cluster has only db 0
	co.ShuffleInit = true
	return co, nil
}

// redactURL hides the password of a URL in errors.
func redactURL(raw string) string {
	i := strings.Index(raw, "://")
	at := strings.LastIndex(raw, "@")
	if i < 0 || at < i {
		return raw
	}
	cred := raw[i+3 : at]
	if c := strings.Index(cred, ":"); c >= 0 {
		return raw[:i+3] + cred[:c] + ":xxxxx" + raw[at:]
	}
	return raw
}

// Close stops the store's workers, closes the client if Open made it, and
// closes the local fallback store. Apply returns ratelimit.ErrClosed
// afterwards. Close is idempotent.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.batch.close()
	if s.own {
		s.client.Close()
	}
	if s.local != nil {
		s.local.Close()
	}
	return nil
}

// Apply decides req in Redis. A denial is a Decision; an error means Redis
// could not decide and Options.OnError is ReturnError (or the request is
// invalid, or the store closed).
func (s *Store) Apply(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	if s.closed.Load() {
		return ratelimit.Decision{}, ratelimit.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return ratelimit.Decision{}, err
	}
	lim := req.Limit.Normalize()
	if lim.Rate == 0 {
		// Nothing is ever admitted, and there is no state to consult.
		return ratelimit.Decision{Limit: lim, Allowed: req.N == 0, Unsatisfiable: req.N > 0}, nil
	}
	var now time.Time
	useNow := s.opts.Now != nil
	if useNow {
		now = s.opts.Now()
	}
	if s.deny != nil && (req.Algorithm != ratelimit.LeakyBucket || req.MaxDelay == 0) {
		if d, ok := s.deny.get(req, s.cacheClock(now)); ok {
			return d, nil
		}
	}
	if !s.brk.allow() {
		return s.fallback(ctx, req, fmt.Errorf("%w: breaker open after %d failures; last: %v", ErrUnavailable, s.opts.BreakerThreshold, s.brk.lastErr()))
	}

	unsatisfiable := req.N > lim.Capacity(req.Algorithm)
	sent := req
	if unsatisfiable {
		sent.N = 0 // report the state, consume nothing
	}
	sh := shapeOf(req.Algorithm)
	c := s.calls.Get().(*call)
	c.key, c.n, c.lim = s.key(sh, req.Key), sent.N, lim
	c.spec, c.bucket = specOf(sh, sent)
	c.sec, c.nsec = 0, 0
	c.state.Store(0)
	if useNow {
		c.sec, c.nsec = now.Unix(), int64(now.Nanosecond())
	}
	g := group{shape: sh}
	if s.cluster {
		g.slot = slot(c.key)
	}
	if !s.batch.submit(g, c) {
		return ratelimit.Decision{}, ratelimit.ErrClosed
	}
	// The watchdog finishes the call at the timeout if Redis does not.
	if done := ctx.Done(); done == nil {
		<-c.done
	} else {
		select {
		case <-c.done:
		case <-done:
			return ratelimit.Decision{}, ctx.Err()
		}
	}
	if c.err != nil {
		return s.fallback(ctx, req, c.err)
	}
	d := c.d
	c.key = ""
	s.calls.Put(c)
	if unsatisfiable {
		d.Allowed, d.Unsatisfiable = false, true
	}
	if s.deny != nil && !d.Allowed && d.RetryAfter > 0 && (req.Algorithm != ratelimit.LeakyBucket || req.MaxDelay == 0) {
		s.deny.put(req, d, s.cacheClock(now))
	}
	return d, nil
}

func (s *Store) cacheClock(now time.Time) int64 {
	if s.opts.Now != nil {
		return now.UnixNano()
	}
	return time.Now().UnixNano()
}

// Stats are a Store's counters since it was opened.
type Stats struct {
	// ScriptCalls is the number of script calls sent to Redis, and
	// Requests the number of requests they carried: Requests/ScriptCalls
	// is the mean batch, the figure that decides the CPU each decision
	// costs on both sides (docs/bench-redis.md). Requests decided without
	// Redis (the denial cache, a failure policy) are not counted.
	ScriptCalls, Requests uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{ScriptCalls: s.batch.scriptCalls.Load(), Requests: s.batch.requests.Load()}
}

// Key returns the Redis key holding key's state under algorithm a, for
// inspection and for deleting a key's state (which resets its limit).
func (s *Store) Key(a ratelimit.Algorithm, key string) string { return s.key(shapeOf(a), key) }

// key returns the Redis key of req.Key's state: prefix, shape tag, and the
// key in braces, so the states of one key share a Cluster hash slot.
func (s *Store) key(sh shape, key string) string {
	return s.opts.Prefix + shapeInfo[sh].tag + "{" + key + "}"
}

// failure wraps an error from the client.
func (s *Store) failure(err error, n int) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		if strings.Contains(msg, "script") || strings.Contains(msg, "Lua") || strings.HasPrefix(msg, "WRONGTYPE") {
			return fmt.Errorf("%w: redis replied %q", ErrScript, msg)
		}
		return fmt.Errorf("%w: redis replied %q (batch of %d)", ErrUnavailable, msg, n)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no reply within %v (batch of %d)", ErrUnavailable, s.opts.Timeout, n)
	}
	return fmt.Errorf("%w: %v (batch of %d)", ErrUnavailable, err, n)
}

// fallback applies the failure policy to req after err.
func (s *Store) fallback(ctx context.Context, req ratelimit.Request, err error) (ratelimit.Decision, error) {
	lim := req.Limit.Normalize()
	if s.opts.OnError == Allow || s.opts.OnError == Deny {
		switch {
		case req.N > lim.Capacity(req.Algorithm):
			return ratelimit.Decision{Limit: lim, Unsatisfiable: true}, nil
		case req.N == 0:
			return ratelimit.Decision{Allowed: true, Limit: lim}, nil
		}
	}
	switch s.opts.OnError {
	case Allow:
		return ratelimit.Decision{Allowed: true, Limit: lim}, nil
	case Deny:
		return ratelimit.Decision{Limit: lim, RetryAfter: s.opts.BreakerCooldown}, nil
	case Local:
		return s.local.Apply(ctx, req)
	}
	return ratelimit.Decision{}, err
}
