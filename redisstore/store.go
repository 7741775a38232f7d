package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/denycache"
	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/internal/tick"
	"github.com/sluicehq/sluice/internal/transport/rawconn"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// Defaults for the zero Options.
const (
	DefaultPrefix             = redislink.DefaultPrefix
	DefaultTimeout            = redislink.DefaultTimeout
	DefaultBreakerThreshold   = redislink.DefaultThreshold
	DefaultBreakerCooldown    = redislink.DefaultCooldown
	DefaultBreakerMaxCooldown = redislink.DefaultMaxCooldown
	DefaultMaxBatch           = 128
	DefaultPipeline           = 2
	DefaultClusterPipeline    = 2
	DefaultDenyCacheSize      = 1 << 16
)

// ErrUnavailable is wrapped by the errors Apply returns when Redis could not
// decide: unreachable, timed out, a cluster slot without its node, not
// connected yet, or the breaker open after such failures.
var ErrUnavailable = errors.New("redisstore: redis unavailable")

// ErrScript is wrapped by errors about a script's reply or a script error
// reported by Redis. They mean a bug or an incompatible server, not an
// outage.
var ErrScript = errors.New("redisstore: script failed")

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
	// Timeout bounds each Apply's wait for Redis, measured from when the
	// call is queued, queueing and every batch it waits behind included:
	// a watchdog checks every Timeout/4, so a wait lasts at most
	// 1.25·Timeout (plus the scheduling delays of a loaded machine).
	// Default 100 ms. A request that timed out may still be counted by
	// Redis when its batch runs late. Open also uses it, when at least a
	// second, as the dial timeout of its connections (the URL's
	// dial_timeout overrides it).
	Timeout time.Duration
	// OnError is what Apply does when Redis cannot decide. Default
	// ratelimit.FailError.
	OnError ratelimit.FailurePolicy
	// BreakerThreshold is the number of consecutive failed calls to a node
	// that opens its breaker (a standalone server is one node; on a
	// Cluster each primary has its own, so that losing one fails only the
	// keys it serves): while it is open, Apply applies OnError at once to
	// the node's keys, without calling Redis, but for one caller's request
	// per BreakerTrial, which goes to Redis and closes the breaker when it
	// is answered; and the store probes Redis in the background (PING to
	// every node, with the scripts loaded again), each node's answer
	// closing its breaker. Default 3; negative disables the breaker (every
	// call then goes to Redis and waits up to Timeout).
	BreakerThreshold int
	// BreakerTrial is the least time between two callers' trials of a
	// node whose breaker is open: decisions go back to Redis within about
	// BreakerTrial (plus a round trip) after it answers again. Default
	// 100 ms; negative leaves it to the background probe.
	BreakerTrial time.Duration
	// BreakerCooldown is how long the breaker stays open before the first
	// background probe. Default 1 s. Each failed probe doubles the wait before the
	// next, up to BreakerMaxCooldown, and each wait is lengthened by a
	// random fraction of up to a quarter, so that the instances of a
	// fleet do not probe in step.
	BreakerCooldown time.Duration
	// BreakerMaxCooldown bounds the wait between probes while Redis stays
	// away. Default 5 s; never less than BreakerCooldown.
	BreakerMaxCooldown time.Duration
	// RequireAtStart makes Open fail when no Redis server answers at once.
	// Off by default: Open then returns a store that applies OnError from
	// the first request and connects in the background (Health reports
	// it). A server that answers and refuses the configuration (a
	// certificate that does not verify, a wrong password, a database that
	// does not exist) always fails Open: that is not an outage. New has
	// its client already and ignores RequireAtStart.
	RequireAtStart bool
	// DenyCache, when true, remembers denials in process: a key denied with
	// RetryAfter d is denied locally for d, without a round trip, for
	// requests costing at least as much. See the package documentation for
	// its accuracy. Off by default.
	DenyCache bool
	// DenyCacheSize bounds the denials remembered: that many, in as many
	// times 256 bytes (each counted as its key plus 128), so that long
	// keys fit fewer. Default 65536.
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
	// batch of requests) while its node's breaker is closed, and every
	// failed connection attempt or probe while Redis is away (at most one
	// per BreakerCooldown, growing to one per BreakerMaxCooldown), for
	// logging and metrics; a caller's failed trial is counted in
	// Health.Failures, not reported. It must not block.
	OnFailure func(error)
	// OnHealth, when set, is called with the store's Health each time it
	// loses Redis (the breaker opens) or gets it back (a probe or a call
	// succeeds, or the first connection of a store that started without
	// Redis), for logging. It is called from the store's goroutines and
	// must not block.
	OnHealth func(Health)
	// Local configures the memstore of the ratelimit.FailLocal policy (its Now is set to
	// this Options' Now).
	Local memstore.Options
	// ScriptOnly sends every request to the scripts. By default a fixed
	// window's charge that would go out alone (nothing queued, no script
	// call and fewer than 4 such charges in flight) is sent as
	// plain commands (INCRBY of the window's one key in a MULTI with TIME
	// and its expiry), which costs redis-server about a third of a
	// script call: see fast.go and docs/redis.md. Set it to measure the
	// difference, or for a server that refuses MULTI.
	ScriptOnly bool
	// CompatWindow is how long after the store starts it writes a fixed
	// window on Redis's clock in the marker form of versions before the
	// one key (a marker naming the window, and a count key of its own),
	// which those versions read, so that a fleet upgraded one instance
	// at a time never has an instance of before meet the one-key form
	// (it cannot read it). 0 means an hour; negative writes the one-key
	// form at once (a fleet with no instance of before). Both forms are
	// read whatever it is. See docs/redis.md.
	CompatWindow time.Duration
	// Layout is how states are kept in Redis: LayoutString (the default),
	// or LayoutPacked, which keeps the buckets' and the windows' states
	// (all but SlidingWindowLog's) as fields of shared hashes, in a fifth
	// (buckets) to a third (windows) of the memory, for about 40% more of
	// redis-server's CPU a decision, and sends every fixed window to the
	// script (docs/redis.md). A store switched to LayoutPacked reads the
	// states the string layout wrote for a while (as it reads readable
	// names, keys.go), not the other way round. It needs Redis 7.0.
	Layout Layout
	// PackedBuckets is the number of hashes per Cluster hash slot (16,384
	// slots, on a standalone server too) that LayoutPacked spreads the
	// states over: a power of two up to 64. Default 2 (DefaultPackedBuckets),
	// for up to about three million limiters; take 2 more for each doubling
	// past that, so that hashes stay below 128 fields.
	PackedBuckets int
	// TLSConfig, when set, is the TLS configuration of Open's rediss:// and
	// rediss-cluster:// connections (a private CA's roots, client
	// certificates). Nil means the system's roots.
	TLSConfig *tls.Config
}

// MinTTLWithNow is the shortest expiry of a key written with Options.Now
// set: Redis expires keys on its own clock, which a simulated clock does not
// follow.
const MinTTLWithNow = redislink.MinTTLWithNow

// Store is a ratelimit.Store keeping limiter state in Redis (standalone or
// Cluster). It is safe for concurrent use. Close releases it.
type Store struct {
	conn       atomic.Pointer[conn]           // nil until the first connection
	dial       func() (rueidis.Client, error) // Open's; nil for New
	own        bool
	opts       Options
	minTTL     int64 // ms
	packBits   uint8 // log2(Options.PackedBuckets)
	scripts    [numShapes]*rueidis.Lua
	undoScript *rueidis.Lua
	nodes      nodeState // a Cluster's slot map and node batches (nodes.go)
	hints      hints
	started    time.Time   // when the store was made: it reads readable names for a while (keys.go)
	noFast     atomic.Bool // the server refused a plain-command charge
	clock      redisClock
	batch      *batcher
	link       *redislink.Link
	deny       *denycache.Cache // nil: no DenyCache
	local      *memstore.Store
	closed     atomic.Bool
	policy     atomic.Uint64   // requests OnError answered
	trials     atomic.Uint64   // callers' trials of a node whose breaker was open
	calls      sync.Pool       // of *call
	life       context.Context // canceled by Close: stops the prober and its probe
	stop       context.CancelFunc
	wg         sync.WaitGroup
}

// conn is a Store's client. A Store that Open made without Redis has none
// until the prober connects; then it keeps that one (the client library
// reconnects its connections by itself).
type conn struct {
	client  rueidis.Client
	cluster bool
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
	s, err := newStore(false, client.Mode() == rueidis.ClientModeCluster, opts)
	if err != nil {
		return nil, err
	}
	s.setConn(client)
	s.preload(ctx)
	s.start()
	return s, nil
}

// setConn makes client the store's.
func (s *Store) setConn(client rueidis.Client) {
	s.conn.Store(&conn{client: client, cluster: client.Mode() == rueidis.ClientModeCluster})
}

// preload sends SCRIPT LOAD for every script to every node, so that the
// first decisions do not pay for NOSCRIPT and EVAL, and a PING first. It
// returns nil when at least one node answered the PING, else the last
// error.
func (s *Store) preload(ctx context.Context) error { return s.load(ctx, nil) }

// load is preload, reporting each node's answer to report (its address,
// and nil or the probe's error).
func (s *Store) load(ctx context.Context, report func(addr string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, max(s.opts.Timeout, time.Second))
	defer cancel()
	cn := s.conn.Load()
	if cn == nil {
		return fmt.Errorf("%w: not connected", ErrUnavailable)
	}
	err := fmt.Errorf("%w: the client knows no node", ErrUnavailable)
	answered := false
	for addr, node := range cn.client.Nodes() {
		cmds := make(rueidis.Commands, 0, 2+len(scriptSources))
		cmds = append(cmds, node.B().Ping().Build())
		for _, src := range scriptSources {
			cmds = append(cmds, node.B().ScriptLoad().Script(src).Build())
		}
		if cn.cluster {
			for _, src := range nodeSources {
				cmds = append(cmds, node.B().ScriptLoad().Script(src).Build())
			}
		}
		for _, src := range s.extraSources(cn.cluster) {
			cmds = append(cmds, node.B().ScriptLoad().Script(src).Build())
		}
		cmds = append(cmds, node.B().ScriptLoad().Script(undoSource).Build(), node.B().Time().Build())
		// Only the PING decides: a server whose ACL forbids SCRIPT LOAD
		// still runs the scripts, by EVAL after a NOSCRIPT.
		sent := time.Now()
		res := node.DoMulti(ctx, cmds...)
		got := time.Now()
		if perr := res[0].Error(); perr != nil {
			err = fmt.Errorf("%w: probe of %s: %v", ErrUnavailable, addr, perr)
			if report != nil {
				report(addr, err)
			}
		} else {
			answered = true
			if report != nil {
				report(addr, nil)
			}
			// A first estimate of Redis's clock, for plain-command charges.
			if t, terr := res[len(res)-1].AsIntSlice(); terr == nil && len(t) == 2 && s.opts.Now == nil {
				s.clock.sample(t[0]*int64(time.Second)+t[1]*int64(time.Microsecond), sent, got)
			}
		}
	}
	if answered {
		if cn.cluster {
			s.readSlots()
		}
		return nil
	}
	return err
}

// start starts the prober: it connects and probes Redis in the background
// while the link is down. Close stops it.
func (s *Store) start() {
	s.wg.Add(1)
	go s.probe()
}

// probe waits for a breaker to open, then probes Redis with the link's
// backoff between tries (each node's answer closes its breaker), until
// every breaker is closed again or the store closes. Callers' trials
// (Options.BreakerTrial) close a breaker sooner while requests come in.
func (s *Store) probe() {
	defer s.wg.Done()
	for {
		select {
		case <-s.life.Done():
			return
		case <-s.link.Wake():
		}
		for n := 0; s.link.AnyDown(); n++ {
			if tick.Sleep(s.life, s.link.Backoff(n)) != nil {
				return
			}
			if !s.link.AnyDown() {
				break // a caller's trial closed the breakers meanwhile
			}
			if err := s.reconnect(); err != nil && s.life.Err() != nil {
				return // Close cut the probe short
			}
		}
	}
}

// reconnect makes the store's client if it has none yet (Open without
// Redis), then probes: PING to every node, with the scripts loaded again,
// since a server that restarted has lost them. Each node's answer, or
// failure, goes to its breaker.
func (s *Store) reconnect() error {
	if s.conn.Load() == nil {
		client, err := s.dial()
		if err != nil {
			s.probeFailed(s.link.Whole(), err)
			return err
		}
		s.setConn(client)
	}
	reported := false
	err := s.load(s.life, func(addr string, err error) {
		node := s.link.Known(addr)
		switch {
		case node == nil: // a replica, or a node the slot map does not name
		case err != nil:
			s.probeFailed(node, err)
			reported = true
		default:
			node.OK()
		}
	})
	switch {
	case err == nil:
		s.link.Whole().OK()
	case !reported:
		s.probeFailed(s.link.Whole(), err) // no node answered, nor failed
	}
	return err
}

// probeFailed records a failed probe of node.
func (s *Store) probeFailed(node *redislink.Node, err error) {
	if s.life.Err() != nil {
		return // Close cut the probe short
	}
	node.Fail(err, true)
	if s.opts.OnFailure != nil {
		s.opts.OnFailure(err)
	}
}

func newStore(own, cluster bool, opts Options) (*Store, error) {
	base := redislink.Base{Prefix: opts.Prefix, Timeout: opts.Timeout, OnError: opts.OnError, Now: opts.Now != nil}
	if err := base.Check("redisstore"); err != nil {
		return nil, err
	}
	opts.Prefix, opts.Timeout = base.Prefix, base.Timeout
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Pipeline <= 0 {
		opts.Pipeline = DefaultPipeline
		if cluster {
			opts.Pipeline = DefaultClusterPipeline
		}
	}
	if opts.DenyCacheSize <= 0 {
		opts.DenyCacheSize = DefaultDenyCacheSize
	}
	packBits, err := packedOptions(&opts)
	if err != nil {
		return nil, err
	}
	s := &Store{
		packBits:   packBits,
		own:        own,
		opts:       opts,
		minTTL:     base.MinTTL(),
		scripts:    newScripts(),
		undoScript: rueidis.NewLuaScript(undoSource),
		link: redislink.New(redislink.Options{Threshold: opts.BreakerThreshold, Cooldown: opts.BreakerCooldown,
			MaxCooldown: opts.BreakerMaxCooldown, Trial: opts.BreakerTrial, OnHealth: opts.OnHealth, Unavailable: ErrUnavailable}),
	}
	for i, src := range nodeSources { // a client may find a Cluster later
		s.nodes.scripts[i] = rueidis.NewLuaScript(src)
	}
	s.usePacked()
	s.life, s.stop = context.WithCancel(context.Background())
	s.started = time.Now()
	s.deny = newDenyCache(opts)
	if opts.OnError == ratelimit.FailLocal {
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
// redis:// and rediss://.
//
// Open tries to connect once (for at most the dial timeout). When no
// server answers, it still returns a store (unless Options.RequireAtStart
// is set): Apply applies Options.OnError from the first request, and the
// store connects in the background (on a Cluster: discovers its slots),
// with the breaker's backoff, loads the scripts, and sends decisions to
// Redis from then on. Health tells where it is. Open fails on a bad URL
// or options, and when the server answers and refuses the configuration,
// which a retry would not change: a certificate that does not verify, a
// wrong password or user, a missing database.
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
	if co.DialFn == nil && co.DialCtxFn == nil && co.TLSConfig == nil {
		// Plain TCP: the socket read and written without the scheduler's
		// bookkeeping, as h2grpc's (internal/transport/rawconn).
		co.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", dst)
			if err != nil {
				return nil, err
			}
			return rawconn.Wrap(c), nil
		}
	}
	dial := func() (rueidis.Client, error) {
		// Each attempt gets its own options: rueidis shuffles InitAddress
		// in place, and a failed attempt's goroutines may still read it.
		o := co
		o.InitAddress = slices.Clone(co.InitAddress)
		client, err := rueidis.NewClient(o)
		if err != nil {
			return nil, fmt.Errorf("%w: connect to %s: %w", ErrUnavailable, redact.URL(rawURL), err)
		}
		return client, nil
	}
	client, err := dial()
	if err != nil && (opts.RequireAtStart || refused(err)) {
		return nil, err
	}
	cluster := len(co.InitAddress) > 1 || strings.HasSuffix(strings.SplitN(rawURL, "://", 2)[0], "-cluster")
	if client != nil {
		cluster = client.Mode() == rueidis.ClientModeCluster
	}
	s, serr := newStore(true, cluster, opts)
	if serr != nil {
		if client != nil {
			client.Close()
		}
		return nil, serr
	}
	s.dial = dial
	if client != nil {
		s.setConn(client)
		s.preload(ctx)
	} else {
		s.link.Whole().StartDown(err)
		if opts.OnFailure != nil {
			opts.OnFailure(err)
		}
	}
	s.start()
	return s, nil
}

// refused reports whether err, from connecting, says that the server
// answered and refused what this store is configured with, which retrying
// would not change: a certificate that does not verify, a wrong password
// or user, missing permissions, a database that does not exist. Replies
// of a server that is starting or failing over (LOADING, MASTERDOWN,
// CLUSTERDOWN, …) and every network error are an outage.
func refused(err error) bool {
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		return true
	}
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.HasPrefix(msg, "ERR") && (strings.Contains(msg, "password") || strings.Contains(msg, "DB index") ||
		strings.Contains(msg, "AUTH"))
}

// ParseURL reads a store URL (redis://, rediss://, unix://, or
// redis-cluster:// and rediss-cluster:// with a host list) into the client
// option Open would use, for callers that open their own client on the
// same Redis (the in-flight leases, say).
func ParseURL(raw string) (rueidis.ClientOption, error) { return parseURL(raw) }

func parseURL(raw string) (rueidis.ClientOption, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	switch scheme {
	case "redis", "rediss", "unix":
		co, err := rueidis.ParseURL(raw)
		if err != nil {
			return co, fmt.Errorf("redisstore: URL %q: %v", redact.URL(raw), redact.Error(raw, err))
		}
		return co, nil
	case "redis-cluster", "rediss-cluster":
	default:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: want redis://, rediss://, unix://, redis-cluster:// or rediss-cluster://", redact.URL(raw))
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
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: URL %q: no host", redact.URL(raw))
	}
	co, err := rueidis.ParseURL(single + "://" + userinfo + addrs[0] + tail)
	if err != nil {
		return co, fmt.Errorf("redisstore: URL %q: %v", redact.URL(raw), redact.Error(raw, err))
	}
	co.InitAddress = addrs
	co.SelectDB = 0 // a cluster has only db 0
	co.ShuffleInit = true
	return co, nil
}

// Close stops the store's workers and its prober, closes the client if
// Open made it, and closes the local fallback store. It waits for a
// connection attempt in progress, which ends within the dial timeout. Apply returns ratelimit.ErrClosed
// afterwards. Close is idempotent.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.stop()
	s.batch.close()
	// A connection attempt in progress ends within its dial timeout.
	s.wg.Wait()
	if cn := s.conn.Load(); s.own && cn != nil {
		cn.client.Close()
	}
	if s.local != nil {
		s.local.Close()
	}
	return nil
}

// decided remembers d in the denial cache when it should.
func (s *Store) decided(req ratelimit.Request, d ratelimit.Decision, now time.Time) ratelimit.Decision {
	if s.deny != nil && !d.Allowed && !d.Unsatisfiable && d.RetryAfter > 0 && (req.Algorithm != ratelimit.LeakyBucket || req.MaxDelay == 0) {
		s.remember(req, d, now)
	}
	return d
}

func (s *Store) cacheClock(now time.Time) int64 {
	if s.opts.Now != nil {
		return now.UnixNano()
	}
	return time.Now().UnixNano()
}

// Client returns the store's client, nil until the store first connected
// (Open without Redis): for the in-flight store on the same Redis
// (redisinflight.New, with its Options.Link set to Link), so that a server
// opens one client. It stays the store's: Close closes it.
func (s *Store) Client() rueidis.Client {
	if cn := s.conn.Load(); cn != nil {
		return cn.client
	}
	return nil
}

// Link returns the store's link to Redis: its breakers (one per Cluster
// primary), callers' trials and background prober, for the in-flight store
// on the same Redis (redisinflight's Options.Link).
func (s *Store) Link() *redislink.Link { return s.link }

// Health returns the state of the store's connection to Redis, for
// metrics and readiness checks: whether decisions come from Redis or from
// Options.OnError, since when, the last error, and counts of failures and
// reconnections. It is cheap (a lock and a copy).
func (s *Store) Health() Health { return s.link.Health() }

// Stats are a Store's counters since it was opened.
type Stats struct {
	// ScriptCalls is the number of script calls sent to Redis, and
	// Requests the number of requests they carried: Requests/ScriptCalls
	// is the mean batch, the figure that decides the CPU each decision
	// costs on both sides (docs/bench-redis.md). Requests decided without
	// Redis (the denial cache, a failure policy) are not counted.
	ScriptCalls, Requests uint64
	// Commands is the number of fixed-window charges sent as plain
	// commands (one transaction each; see Options.ScriptOnly), and
	// FellBack the number of those whose answer did not stand and went to
	// the script.
	Commands, FellBack uint64
	// SplitBatches is the number of a Cluster's node batches (one script
	// call for the keys of several slots on one node) that found a key
	// their node no longer serves, and went again one call per slot.
	SplitBatches uint64
	// PolicyAnswers is the number of requests Options.OnError answered
	// (Redis could not decide: a failed call, or the breaker of the key's
	// node open), whatever the policy; Trials the number of callers'
	// requests sent to a node whose breaker was open, to try it.
	PolicyAnswers, Trials uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{ScriptCalls: s.batch.scriptCalls.Load(), Requests: s.batch.requests.Load(), Commands: s.batch.commands.Load(), FellBack: s.batch.fellBack.Load(), SplitBatches: s.nodes.splits.Load(),
		PolicyAnswers: s.policy.Load(), Trials: s.trials.Load()}
}
