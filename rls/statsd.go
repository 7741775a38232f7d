package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	gostats "github.com/lyft/gostats"
	"github.com/sluicehq/sluice/internal/tick"
)

// DefaultStatsdFlushInterval is how often a Statsd sends its stats when
// StatsdOptions.FlushInterval is zero: envoyproxy/ratelimit's
// STATS_FLUSH_INTERVAL default.
const DefaultStatsdFlushInterval = 10 * time.Second

// maxDatagram is the most bytes of one UDP datagram: what fits a 1500-byte
// MTU without fragmenting, as gostats sends.
const maxDatagram = 1432

// StatsdOptions configures a Statsd. The zero value sends over UDP every
// DefaultStatsdFlushInterval with no prefix and no tags.
type StatsdOptions struct {
	// Network is "udp" (the default, statsd's usual transport) or "tcp"
	// (envoyproxy/ratelimit's gostats sink).
	Network string
	// Prefix, when set, is put with a dot before every stat name
	// ("edge" makes "edge.ratelimit.service…"). envoyproxy/ratelimit has none.
	Prefix string
	// Tags are added to every stat, as envoyproxy/ratelimit's EXTRA_TAGS
	// adds them: gostats's ".__name=value" suffixes.
	Tags map[string]string
	// FlushInterval is how often the stats are sent (STATS_FLUSH_INTERVAL).
	// Zero means DefaultStatsdFlushInterval.
	FlushInterval time.Duration
	// Logger receives send failures, at most one line per flush. Nil
	// discards.
	Logger *slog.Logger
}

// Statsd sends envoyproxy/ratelimit's stats, with its names, to a statsd
// server: counters are summed in process (an atomic add per hit, no
// allocation) and sent as deltas every flush interval, gauges as their
// value then, as envoyproxy/ratelimit's gostats store does. Give it to a
// Server with Options.Statsd; one Statsd serves one Server. Close stops it.
//
// The stats are those envoyproxy/ratelimit's statsd sink receives:
//
//	ratelimit.service.rate_limit.DOMAIN.KEY.total_hits     (and over_limit,
//	    near_limit, within_limit, shadow_mode, over_limit_with_local_cache)
//	ratelimit.service.rate_limit.DOMAIN.domain_not_found   (a domain no file has)
//	ratelimit.service.config_load_success, config_load_error, global_shadow_mode
//	ratelimit.service.call.should_rate_limit.redis_error   (the store failed)
//	ratelimit.service.call.should_rate_limit.service_error (a bad request)
//	ratelimit_server.ShouldRateLimit.total_requests
//	ratelimit.localcache.hitCount, missCount, lookupCount, entryCount,
//	    evacuateCount, expiredCount, overwriteCount (gauges)
//	ratelimit.go.*                                          (Go runtime gauges)
//
// KEY is the rule's path, or with detailed_metric the request's values,
// with ':' and '|' and the dots of IPv4 addresses turned into '_'
// (upstream's SanitizeStatName); the keys request values may create are
// bounded as the Prometheus series are (Options.MaxDetailedSeries).
type Statsd struct {
	store gostats.Store
	root  gostats.Scope // [prefix.]ratelimit, with the tags
	srv   gostats.Scope // [prefix.]ratelimit_server, with the tags
	sink  *statsdSink

	interval time.Duration
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	used     sync.Mutex // one Server per Statsd
	taken    bool
}

// DialStatsd returns a Statsd sending to addr (host:port), and starts its
// flush loop. With TCP, a connection that cannot be made or breaks is
// tried again at the next flush; that flush's stats are dropped.
func DialStatsd(addr string, opts StatsdOptions) (*Statsd, error) {
	network := opts.Network
	if network == "" {
		network = "udp"
	}
	if network != "udp" && network != "tcp" {
		return nil, fmt.Errorf("rls: statsd network %q: want udp or tcp", network)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("rls: statsd address %q: %w", addr, err)
	}
	for k, v := range opts.Tags {
		if k == "" || strings.ContainsAny(k+v, ".:|=\n") {
			return nil, fmt.Errorf("rls: statsd tag %q=%q: a name and value without '.', ':', '|', '=' or newlines", k, v)
		}
	}
	if opts.FlushInterval < 0 {
		return nil, fmt.Errorf("rls: statsd flush interval %v is negative", opts.FlushInterval)
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = DefaultStatsdFlushInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sink := &statsdSink{network: network, addr: addr, log: log}
	if network == "udp" {
		// A UDP socket is only bound here; nothing is sent until a flush.
		if err := sink.dial(); err != nil {
			return nil, fmt.Errorf("rls: statsd: %w", err)
		}
	}
	store := gostats.NewStore(sink, false)
	var base gostats.Scope = store
	if opts.Prefix != "" {
		base = store.Scope(strings.Trim(opts.Prefix, "."))
	}
	s := &Statsd{
		store: store, sink: sink,
		root:     base.ScopeWithTags("ratelimit", opts.Tags),
		srv:      base.ScopeWithTags("ratelimit_server", opts.Tags),
		interval: opts.FlushInterval,
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
	store.AddStatGenerator(gostats.NewRuntimeStats(s.root.Scope("go")))
	go s.run()
	return s, nil
}

func (s *Statsd) run() {
	defer close(s.done)
	tick.Loop(s.stop, s.interval, func(time.Time) { s.store.Flush() })
}

// Flush sends the stats now: the counters' increments since the last
// flush (counters that did not move are not sent) and every gauge.
func (s *Statsd) Flush() { s.store.Flush() }

// Close stops the flush loop, sends what is left and closes the
// connection.
func (s *Statsd) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.store.Flush()
		err = s.sink.close()
	})
	return err
}

// take claims s for one Server.
func (s *Statsd) take() error {
	s.used.Lock()
	defer s.used.Unlock()
	if s.taken {
		return errors.New("rls: a Statsd serves one Server")
	}
	s.taken = true
	return nil
}

// statsdService are the service-wide counters of ratelimit.service.
type statsdService struct {
	configLoadSuccess, configLoadError, globalShadow gostats.Counter
	redisError, serviceError                         gostats.Counter
	totalRequests                                    gostats.Counter
}

func (s *Statsd) service() *statsdService {
	svc := s.root.Scope("service")
	call := svc.Scope("call.should_rate_limit")
	return &statsdService{
		configLoadSuccess: svc.NewCounter("config_load_success"),
		configLoadError:   svc.NewCounter("config_load_error"),
		globalShadow:      svc.NewCounter("global_shadow_mode"),
		redisError:        call.NewCounter("redis_error"),
		serviceError:      call.NewCounter("service_error"),
		totalRequests:     s.srv.NewCounter("ShouldRateLimit.total_requests"),
	}
}

// statsdRule are one stats key's counters:
// ratelimit.service.rate_limit.KEY.*.
type statsdRule struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode, localCache gostats.Counter
}

// rule returns the counters of the stats key "domain.label".
func (s *Statsd) rule(domain, label string) *statsdRule {
	key := sanitizeStatName(domain + "." + label)
	sc := s.root.Scope("service").Scope("rate_limit")
	return &statsdRule{
		totalHits:   sc.NewCounter(key + ".total_hits"),
		overLimit:   sc.NewCounter(key + ".over_limit"),
		nearLimit:   sc.NewCounter(key + ".near_limit"),
		withinLimit: sc.NewCounter(key + ".within_limit"),
		shadowMode:  sc.NewCounter(key + ".shadow_mode"),
		localCache:  sc.NewCounter(key + ".over_limit_with_local_cache"),
	}
}

// domainNotFound returns the counter of an unknown domain's descriptors:
// ratelimit.service.rate_limit.DOMAIN.domain_not_found.
func (s *Statsd) domainNotFound(domain string) gostats.Counter {
	return s.root.Scope("service").Scope("rate_limit").NewCounter(sanitizeStatName(domain) + ".domain_not_found")
}

// localCacheGauges registers the local cache's gauges, set at each flush
// from stats (envoyproxy/ratelimit's freecache gauges).
func (s *Statsd) localCacheGauges(stats func() LocalCacheStats) {
	sc := s.root.Scope("localcache")
	g := statsdCacheGauges{stats: stats}
	for i, name := range [...]string{"hitCount", "missCount", "lookupCount", "entryCount",
		"evacuateCount", "expiredCount", "overwriteCount"} {
		g.g[i] = sc.NewGauge(name)
	}
	s.store.AddStatGenerator(g)
}

type statsdCacheGauges struct {
	stats func() LocalCacheStats
	g     [7]gostats.Gauge
}

func (g statsdCacheGauges) GenerateStats() {
	st := g.stats()
	for i, v := range [...]uint64{st.Hits, st.Misses, st.Lookups, st.Entries, st.Evictions, st.Expired, st.Overwrites} {
		g.g[i].Set(v)
	}
}

var (
	ipv4InStat      = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)
	statNameReplace = strings.NewReplacer(":", "_", "|", "_", "\n", "_")
)

// sanitizeStatName makes a stats key safe for the statsd line protocol as
// envoyproxy/ratelimit does: ':' and '|' become '_', and so do the dots of
// what looks like an IPv4 address (so 10.0.0.1 stays one name part).
// Newlines, which a request value may carry, become '_' too.
func sanitizeStatName(s string) string {
	return ipv4InStat.ReplaceAllStringFunc(statNameReplace.Replace(s), func(ip string) string {
		return strings.ReplaceAll(ip, ".", "_")
	})
}

// statsdSink writes the statsd line protocol ("name:value|c") to one
// connection: over UDP in datagrams of at most maxDatagram bytes, over TCP
// as a stream. gostats calls it from Flush, one goroutine at a time, but
// the mutex keeps Close safe beside a flush.
type statsdSink struct {
	network, addr string
	log           *slog.Logger

	mu      sync.Mutex
	conn    net.Conn
	buf     bytes.Buffer // the datagram (UDP) or the flush (TCP) being built
	dropped int          // lines not sent in this flush
	lastErr error
	closed  bool
}

func (k *statsdSink) dial() error {
	c, err := net.DialTimeout(k.network, k.addr, time.Second)
	if err != nil {
		return err
	}
	k.conn = c
	return nil
}

func (k *statsdSink) FlushCounter(name string, v uint64) {
	k.line(name, strconv.FormatUint(v, 10), "|c")
}
func (k *statsdSink) FlushGauge(name string, v uint64) { k.line(name, strconv.FormatUint(v, 10), "|g") }
func (k *statsdSink) FlushTimer(name string, v float64) {
	k.line(name, strconv.FormatFloat(v, 'f', -1, 64), "|ms")
}

func (k *statsdSink) line(name, value, typ string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(name) + 1 + len(value) + len(typ) + 1
	if k.network == "udp" && k.buf.Len() > 0 && k.buf.Len()+n > maxDatagram {
		k.send()
	}
	k.buf.WriteString(name)
	k.buf.WriteByte(':')
	k.buf.WriteString(value)
	k.buf.WriteString(typ)
	k.buf.WriteByte('\n')
}

// Flush sends what is buffered and logs this flush's failures.
func (k *statsdSink) Flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.send()
	if k.dropped > 0 {
		k.log.Warn("rls: statsd: stats dropped", "lines", k.dropped, "addr", k.addr, "err", k.lastErr)
		k.dropped, k.lastErr = 0, nil
	}
}

// send writes the buffer; k.mu is held.
func (k *statsdSink) send() {
	if k.buf.Len() == 0 {
		return
	}
	defer k.buf.Reset()
	if k.closed {
		return
	}
	if k.conn == nil {
		if err := k.dial(); err != nil {
			k.drop(err)
			return
		}
	}
	k.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := k.conn.Write(k.buf.Bytes()); err != nil {
		k.drop(err)
		if k.network == "tcp" {
			k.conn.Close()
			k.conn = nil // dialled again at the next send
		}
	}
}

func (k *statsdSink) drop(err error) {
	k.dropped += bytes.Count(k.buf.Bytes(), []byte{'\n'})
	k.lastErr = err
}

func (k *statsdSink) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.conn == nil {
		return nil
	}
	err := k.conn.Close()
	k.conn = nil
	return err
}
