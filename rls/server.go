package rls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/denycache"
	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/eventlog"
	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rules"
)

// MaxHitsAddend is the largest hits_addend a descriptor may carry. The
// request-level field is a uint32; a descriptor's own is a uint64, and
// anything above the request field's range is refused (InvalidArgument)
// rather than wrapped or clamped.
const MaxHitsAddend = math.MaxUint32

// DefaultNearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO: hits
// past this fraction of a limit count as near_limit.
const DefaultNearLimitRatio = 0.8

// ServiceName is the gRPC service name the health service reports, besides
// the empty (whole server) name.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// Options configures a Server. The zero value is a good default.
type Options struct {
	// Logger receives reloads, store failures and bad requests. Nil
	// discards.
	Logger *slog.Logger
	// Registry is where the server registers its metrics, and what
	// Handler's /metrics serves. Nil means a registry of the server's own.
	Registry *prometheus.Registry
	// Headers selects the response headers. The zero value is header.IETF;
	// set header.Off to add none (envoyproxy/ratelimit's default).
	Headers header.Mode
	// HeaderNames renames header.Legacy's headers; other modes ignore it.
	HeaderNames header.Names
	// NearLimitRatio is the fraction of a limit past which hits count as
	// near_limit. Zero means DefaultNearLimitRatio.
	NearLimitRatio float64
	// ShadowMode answers every request OK while counting and reporting as
	// usual (each descriptor's status still says OVER_LIMIT): the global
	// shadow mode of envoyproxy/ratelimit's SHADOW_MODE, for trying a
	// configuration on live traffic.
	ShadowMode bool
	// QuotaMode puts every descriptor in quota_mode, as envoyproxy/ratelimit's
	// QUOTA_MODE: the answer is OVER_LIMIT only when every descriptor other
	// than unlimited ones is over (a descriptor no rule matches counts as a
	// quota descriptor within its limit, as upstream counts it).
	QuotaMode bool
	// ResponseDynamicMetadata adds envoyproxy/ratelimit's
	// RESPONSE_DYNAMIC_METADATA to every answer: the request's domain,
	// descriptors and hits_addend, and the merged metadata of the rules
	// of the descriptors that passed, for Envoy's filters and access logs.
	ResponseDynamicMetadata bool
	// StopIncrementWhenOverLimit is envoyproxy/ratelimit's
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when one of a request's
	// fixed-window descriptors would go over its limit, the request's other
	// fixed-window descriptors are not charged (their counters read first,
	// and they answer from that); the ones over are charged as usual. It
	// costs one more store call per fixed-window descriptor of requests with
	// two or more of them (with one, the answer and the count are the same
	// either way, and nothing more is read). As upstream, a shadow_mode or
	// quota_mode descriptor that would go over counts too; descriptors of
	// sluice's other algorithms are charged as usual.
	StopIncrementWhenOverLimit bool
	// ParallelDescriptors applies the descriptors of one request to the
	// store concurrently rather than one after the other: set it for a
	// remote store (Redis), where it turns one round trip per descriptor
	// into about one per request, as envoyproxy/ratelimit's pipeline does.
	// Leave it off for the memory store, where a goroutine costs more than
	// the decision.
	ParallelDescriptors bool
	// StoreStatus, when set, says whether the store decides for itself
	// and how it is, for /readyz (storeurl.Store.Ready).
	StoreStatus func() (ok bool, detail string)
	// MetricLabels is the label scheme of the per-rule metrics. The zero
	// value is MetricLabelsEnvoy (domain, key1, key2), as envoyproxy/ratelimit's
	// Prometheus output labels them; MetricLabelsSluice is domain and key.
	MetricLabels MetricLabels
	// MaxDetailedSeries bounds the metric keys each detailed_metric or
	// value_to_metric rule, and each domain's limit overrides, get from
	// request values; later values count under "<key>.__overflow__" and in
	// ratelimit_service_rate_limit_detailed_metric_overflow, so a client
	// sending fresh values cannot grow /metrics without bound. Zero means
	// DefaultMaxDetailedSeries; negative, none.
	MaxDetailedSeries int
	// HealthyWithConfig keeps the health service and /healthcheck
	// NOT_SERVING until the configuration has a domain (New's set, or
	// SetRules'), and NOT_SERVING again if a configuration with none
	// replaces it: envoyproxy/ratelimit's
	// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, for a server whose rules
	// come later (xDS) or from a directory that may be empty.
	HealthyWithConfig bool
	// LogInterval is how often store failures and denials are logged, one
	// line per kind and rule with counts and sample keys
	// (internal/server/eventlog), so that an outage or a flood does not write a
	// line per request. Zero means 10 s.
	LogInterval time.Duration
	// LocalCacheSize, when positive, turns on the local over-limit cache
	// with that many bytes (envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES,
	// on any store): a descriptor found over its limit is answered
	// OVER_LIMIT from memory, without a store call, until its window ends
	// (a fixed window) or its Retry-After passes (sluice's other
	// algorithms). See LocalCacheStats.
	LocalCacheSize int
	// Statsd, when set, receives envoyproxy/ratelimit's stats with its
	// names, besides Prometheus (see Statsd). The caller closes it after
	// the server.
	Statsd *Statsd
	// Now is the clock for what the store does not report: the reset of a
	// window nobody has hit yet, and calendar quota periods. Nil means
	// time.Now.
	Now func() time.Time
	// Prefetch is the store that rules with prefetch: true decide with: a
	// prefetch view of the Redis store (redisstore.Prefetch) over the same
	// Redis as the store. Nil (the memory store): those rules are decided
	// by the store, exactly, and a warning names each of them once (with
	// its file:line).
	Prefetch ratelimit.Store
	// AccessLog, when set, gets a line per limited descriptor of every
	// request (internal/server/accesslog); the caller closes it after the
	// server, and exports its Dropped (RegisterAccessLog). Nil: no access
	// log.
	AccessLog *accesslog.Log
	// Tracer, when set, makes a span of every call, the child of the
	// caller's W3C trace context (internal/server/tracing); the caller
	// shuts it down after the server. Nil: no spans.
	Tracer *tracing.Tracer
}

// Server answers ShouldRateLimit. Create it with New; it is safe for
// concurrent use.
type Server struct {
	pb.UnimplementedRateLimitServiceServer

	store      ratelimit.Store
	prefetched ratelimit.Store // Options.Prefetch
	warnMu     sync.Mutex
	warned     map[string]bool           // "file:line key" (or path) of what warnOnce said
	set        atomic.Pointer[rules.Set] // bound to store (bind)
	log        *slog.Logger
	reg        *prometheus.Registry
	m          *metrics
	health     *health.Server
	headers    header.Mode
	names      header.Names
	nearRatio  float64
	parallel   bool
	shadow     bool
	stopIncr   bool
	quota      bool // global quota mode
	now        func() time.Time
	scratch    sync.Pool // *scratch
	loaded     atomic.Pointer[loaded]
	events     *eventlog.Log   // store failures and denials, aggregated
	access     *accesslog.Log  // Options.AccessLog; nil: off
	tracer     *tracing.Tracer // Options.Tracer; nil: off

	storeStatus func() (bool, string)
	dynMeta     bool
	ops         *ops // /status and the admin API (status.go)

	healthyWithConfig bool             // Options.HealthyWithConfig (configHealth)
	lc                *denycache.Cache // nil: no local over-limit cache
	sdRequests        gostats.Counter  // ratelimit_server.ShouldRateLimit.total_requests; nil without statsd
}

var _ pb.RateLimitServiceServer = (*Server)(nil)

// New returns a Server deciding with store under set. A nil set serves an
// empty configuration (every descriptor is OK) until SetRules.
func New(store ratelimit.Store, set *rules.Set, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("rls: nil store")
	}
	s := &Server{
		store:       store,
		prefetched:  opts.Prefetch,
		log:         opts.Logger,
		reg:         opts.Registry,
		headers:     opts.Headers,
		nearRatio:   opts.NearLimitRatio,
		now:         opts.Now,
		parallel:    opts.ParallelDescriptors,
		shadow:      opts.ShadowMode,
		stopIncr:    opts.StopIncrementWhenOverLimit,
		quota:       opts.QuotaMode,
		storeStatus: opts.StoreStatus,
		dynMeta:     opts.ResponseDynamicMetadata,
		access:      opts.AccessLog,
		tracer:      opts.Tracer,
		health:      health.NewServer(),
	}
	for _, n := range []string{opts.HeaderNames.Limit, opts.HeaderNames.Remaining, opts.HeaderNames.Reset} {
		if n != "" && !httpguts.ValidHeaderFieldName(n) {
			return nil, fmt.Errorf("rls: %q is not a valid header name", n)
		}
	}
	s.names = opts.HeaderNames
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.events = eventlog.New(s.log, eventlog.Options{Interval: opts.LogInterval})
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	if s.nearRatio <= 0 {
		s.nearRatio = DefaultNearLimitRatio
	}
	if s.now == nil {
		s.now = time.Now
	}
	m, err := newSchemeMetrics(s.reg, opts.MaxDetailedSeries, opts.MetricLabels)
	if err != nil {
		return nil, err
	}
	s.m = m
	if opts.LocalCacheSize < 0 {
		return nil, fmt.Errorf("rls: local cache size %d is negative", opts.LocalCacheSize)
	}
	if s.lc = newLocalCache(opts.LocalCacheSize); s.lc != nil {
		m.localCache = true
		if err := registerLocalCache(s.reg, s.lc); err != nil {
			return nil, err
		}
	}
	if sd := opts.Statsd; sd != nil {
		if err := sd.take(); err != nil {
			return nil, err
		}
		m.attachStatsd(sd)
		s.sdRequests = sd.service().totalRequests
		if lc := s.lc; lc != nil {
			sd.localCacheGauges(lc.Stats)
		}
	}
	if set == nil {
		set, _ = rules.NewSet()
	}
	if set, err = s.bind(set); err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	s.set.Store(set)
	s.ops = newOps(s)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.healthyWithConfig = opts.HealthyWithConfig
	s.configHealth(set)
	return s, nil
}

// Register adds the rate limit service and the gRPC health service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	g.RegisterService(&serviceDesc, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// Close writes the last aggregated log lines and stops their goroutine.
// Call it once the server no longer answers.
func (s *Server) Close() error {
	s.ops.close()
	return s.events.Close()
}

// storeFailed counts and logs a request's store failure, and returns its
// answer (Unavailable).
func (s *Server) storeFailed(domain string, sc *scratch, err error) error {
	checks, descs := sc.checks, sc.descs
	s.m.storeError.Inc()
	s.ops.storeError(checks)
	// Logged per domain (which descriptor's call failed is not known
	// when they ran together), with the first limited key as a sample.
	key := ""
	for i := range checks {
		if checks[i].Kind == kindLimited {
			key = checks[i].Request.Key
			break
		}
	}
	s.events.Report(eventlog.StoreError, domain, key, err)
	if s.access != nil {
		s.logAccess(domain, checks, descs, true)
	}
	err = status.Errorf(codes.Unavailable, "rls: store: %v", err)
	if sp := sc.span; sp != nil {
		traceDecisions(sp, checks, true)
		sp.Fail(err)
	}
	return err
}

// logDenial reports an over-limit descriptor to the aggregated log: a
// shadow denial, or an enforced one (quota_mode's too).
func (s *Server) logDenial(c *check) {
	kind := eventlog.Denied
	if c.Shadow {
		kind = eventlog.ShadowDenied
	}
	s.events.Report(kind, c.ruleName(), c.Request.Key, nil)
}

// Shutdown marks the server NOT_SERVING on the health service and
// /healthcheck, so load balancers drain it before it stops.
func (s *Server) Shutdown() { s.health.Shutdown() }

// Rules returns the configuration in use.
func (s *Server) Rules() *rules.Set { return s.set.Load() }

// SetRules swaps the configuration. Requests in flight finish with the old
// one. The rules are bound to the store first (rules.Set.Bind); a
// configuration the store refuses is a config error, logged and counted in
// config_load_error, and the previous configuration stays.
func (s *Server) SetRules(set *rules.Set) {
	if err := s.swap(set); err != nil {
		s.m.configLoadError.Inc()
		s.log.Error("rls: config refused by the store; keeping the previous one", slog.Any("error", err))
	}
}

// swap binds set to the store and swaps it in; on error nothing changes.
func (s *Server) swap(set *rules.Set) error {
	if set == nil {
		set, _ = rules.NewSet()
	}
	b, err := s.bind(set)
	if err != nil {
		return err
	}
	s.set.Store(b)
	s.configHealth(b)
	return nil
}

// bind prepares set's rules on the store once, for every request to come
// (rules.Set.Bind): each rule's own algorithm and limit, and, for a fixed
// window, the one applyEnvoyWindow charges. Rules with prefetch: true go to
// the prefetch view, when there is one; without one they are exact, with a
// warning.
func (s *Server) bind(set *rules.Set) (*rules.Set, error) {
	s.warnOnce(set)
	return set.Bind(s.store, rules.BindOptions{Prefetch: s.prefetched, Variant: envoyWindowVariant})
}

// warnOnce logs what set says that works but should be said otherwise (a
// deprecated spelling; prefetch: true without a Redis store), once: a
// reload of the same file does not say it again.
func (s *Server) warnOnce(set *rules.Set) {
	s.warnMu.Lock()
	defer s.warnMu.Unlock()
	seen := s.warned
	s.warned = make(map[string]bool)
	once := func(key string) bool {
		s.warned[key] = true
		return !seen[key]
	}
	for _, p := range set.Warnings() {
		if at := fmt.Sprintf("%s:%d", p.File, p.Line); once(at + " " + p.Path) {
			s.log.Warn("rls: "+p.Msg, slog.String("at", at), slog.String("path", p.Path))
		}
	}
	if s.prefetched != nil {
		return
	}
	for _, r := range set.PrefetchRules() {
		if at := fmt.Sprintf("%s:%d", r.File, r.Line); once(at + " " + r.Key) {
			s.log.Warn("rls: prefetch: true has no effect without a Redis store: the rule is decided exactly (the memory store decides every rule in process already)",
				slog.String("rule", r.Key), slog.String("at", at))
		}
	}
}

// envoyWindowVariant is the limit applyEnvoyWindow charges for a fixed
// window rule: one event more than the rule's.
func envoyWindowVariant(r *rules.Rule) (ratelimit.Algorithm, ratelimit.Limit, bool) {
	if r.Algorithm != ratelimit.FixedWindow || r.Quota != nil || r.Unlimited {
		return 0, ratelimit.Limit{}, false
	}
	return ratelimit.FixedWindow, ratelimit.Limit{Rate: r.Limit.Rate + 1, Period: r.Limit.Period}, true
}

// Registry returns the registry holding the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// kind says what a descriptor resolved to (rules.Set.Resolve).
type kind = rules.Kind

const (
	kindNone      = rules.NoLimit   // no rule: OK, nothing counted
	kindUnlimited = rules.Unlimited // unlimited rule: OK, remaining MaxUint32
	kindLimited   = rules.Limited   // a limit to apply
)

// check is one descriptor's resolution and outcome.
type check struct {
	// Check is what the descriptor resolved to (rules.Set.Resolve): kind,
	// rule (nil for an override), shadow, quota end and the store request
	// (key, limit, algorithm, hits), the limit and shadow as adjusted by
	// the admin API. Its Decide charges the store.
	*rules.Check
	unit      pb.RateLimitResponse_RateLimit_Unit // an override's unit, as sent
	mult      uint32                              // and its unit_multiplier; 0 when none
	d         ratelimit.Decision
	over      bool  // over the limit (before shadow mode)
	remaining int64 // limit_remaining (0 when over)
	before    int64 // usage before this request's hits, as envoyproxy/ratelimit counts it
	after     int64 // and after
	stats     *ruleStats
	skip      bool // outcome already set, not charged (StopIncrementWhenOverLimit)
	cached    bool // answered from the local over-limit cache
}

type scratch struct {
	entries   []rules.Entry
	descs     []rules.Descriptor
	overrides []ratelimit.Limit
	resolved  []rules.Check
	checks    []check
	span      *tracing.Span // the call's, when traced (shouldRateLimitTraced)
}

// requestError is a bad request: InvalidArgument over gRPC, 400 over HTTP.
func requestError(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "rls: "+format, args...)
}

// ShouldRateLimit decides req. Bad requests are InvalidArgument; a store
// failure (after the store's own failure policy) is Unavailable.
func (s *Server) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if s.sdRequests != nil {
		s.sdRequests.Inc()
	}
	if req.GetDomain() == "" {
		s.m.serviceError.Inc()
		return nil, requestError("rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		s.m.serviceError.Inc()
		return nil, requestError("rate limit descriptor list must not be empty")
	}
	sc, _ := s.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	defer s.scratch.Put(sc)
	if s.tracer != nil {
		return s.decideTraced(ctx, req, sc)
	}
	resp, err := s.decide(ctx, req, sc)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// decideTraced is decide in the call's span (Options.Tracer), the child
// of the caller's trace context in the gRPC metadata (or the /json
// request's headers).
func (s *Server) decideTraced(ctx context.Context, req *pb.RateLimitRequest, sc *scratch) (*pb.RateLimitResponse, error) {
	ctx, sp := s.tracer.StartCall(ctx, pb.RateLimitService_ShouldRateLimit_FullMethodName)
	sp.SetAttributes("ratelimit.domain", req.Domain)
	sc.span = sp
	resp, err := s.decide(ctx, req, sc)
	sc.span = nil
	sp.End()
	return resp, err
}

func (s *Server) decide(ctx context.Context, req *pb.RateLimitRequest, sc *scratch) (*pb.RateLimitResponse, error) {
	set := s.set.Load()
	domain := req.Domain
	known := set.Config(domain) != nil
	if !known {
		s.m.domainNotFound(domain, len(req.Descriptors))
	}
	if err := s.read(req, known, sc); err != nil {
		s.m.serviceError.Inc()
		return nil, err
	}
	resolved, err := set.Resolve(sc.resolved[:0], rules.Input{Domain: domain, Descriptors: sc.descs, Now: s.now})
	sc.resolved = resolved
	if err != nil {
		return nil, status.Errorf(codes.Internal, "rls: %v", err)
	}
	checks := sc.checks
	limited := 0
	for i := range resolved {
		r, c := &resolved[i], &checks[i]
		c.Check = r
		if c.Kind != kindLimited {
			continue
		}
		limited++
		s.ops.adjust(c)
		// Counters only for what is applied: a replaced rule counts nothing.
		if c.Rule != nil {
			c.stats = s.m.forRule(c.Rule, sc.descs[i].Entries)
		} else {
			c.stats = s.m.forKey(domain, overrideMetricKey(domain, sc.descs[i].Entries))
		}
	}
	if err := s.applyAll(ctx, checks, limited, sc.span); err != nil {
		return nil, s.storeFailed(domain, sc, err)
	}
	for i := range checks {
		if c := &checks[i]; c.Kind == kindLimited {
			c.stats.record(c, s.nearRatio)
			s.ops.record(c)
			if c.over {
				s.logDenial(c)
			}
		}
	}
	if s.access != nil {
		s.logAccess(domain, checks, sc.descs, false)
	}
	if sc.span != nil {
		traceDecisions(sc.span, checks, false)
	}
	resp := s.respond(checks)
	if s.dynMeta {
		resp.DynamicMetadata = dynamicMetadata(req, checks, resp)
	}
	return resp, nil
}

// applyAll charges the store for the limited checks (limited of them):
// in parallel when they allow it, else one after the other; the time it
// takes goes on span, when the call is traced.
func (s *Server) applyAll(ctx context.Context, checks []check, limited int, span *tracing.Span) (err error) {
	var t0 time.Time
	if span != nil {
		t0 = time.Now()
	}
	if s.stopIncr && limited > 1 {
		err = s.spareWithinLimit(ctx, checks)
	}
	switch {
	case err != nil:
		// A store failure, answered by the caller.
	case s.parallel && limited > 1 && limited <= maxParallel && distinctKeys(checks):
		err = s.applyParallel(ctx, checks)
	default:
		for i := range checks {
			if c := &checks[i]; c.Kind == kindLimited {
				if err = s.apply(ctx, c); err != nil {
					break
				}
			}
		}
	}
	if span != nil {
		span.StoreTime(time.Since(t0))
	}
	return err
}

// read turns req's descriptors into rules.Descriptors (entries, hits
// and limit overrides) in sc, with a check for each. Overrides are
// validated only in a known domain: elsewhere they limit nothing.
func (s *Server) read(req *pb.RateLimitRequest, knownDomain bool, sc *scratch) error {
	descs := req.Descriptors
	sc.checks = append(sc.checks[:0], make([]check, len(descs))...)
	sc.entries, sc.descs, sc.overrides = sc.entries[:0], sc.descs[:0], sc.overrides[:0]
	n := 0
	for _, desc := range descs {
		n += len(desc.GetEntries())
	}
	sc.entries = slices.Grow(sc.entries, n)
	for i, desc := range descs {
		hits, err := hitsOf(req, desc)
		if err != nil {
			return err
		}
		start := len(sc.entries)
		for _, e := range desc.GetEntries() {
			sc.entries = append(sc.entries, rules.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		d := rules.Descriptor{Entries: sc.entries[start:len(sc.entries):len(sc.entries)], Hits: hits}
		if o := desc.GetLimit(); o != nil && knownDomain {
			lim, err := overrideLimit(o)
			if err != nil {
				return err
			}
			sc.overrides = append(sc.overrides, lim)
			c := &sc.checks[i]
			c.unit, c.mult = pb.RateLimitResponse_RateLimit_Unit(o.GetUnit()), o.GetUnitMultiplier().GetValue()
		}
		sc.descs = append(sc.descs, d)
	}
	// Point the overrides at their array only now: it may have grown.
	k := 0
	for i, desc := range descs {
		if desc.GetLimit() != nil && knownDomain {
			sc.descs[i].Override = &sc.overrides[k]
			k++
		}
	}
	return nil
}

// apply runs c against the store and sets its outcome: c.d, c.over (over
// the limit, before shadow mode), c.remaining, and c.before and c.after,
// the usage around this request's hits that the metrics count with.
func (s *Server) apply(ctx context.Context, c *check) error {
	if s.lc != nil {
		return s.applyCached(ctx, c)
	}
	if c.skip {
		return nil
	}
	return s.applyStore(ctx, c)
}

// applyCached is apply through the local over-limit cache: a key it holds
// answers over without a store call; one the store finds over is added.
// Every limited descriptor is looked up, a skipped one too, as
// envoyproxy/ratelimit looks each up before it decides what to increment
// (so that the cache's hit and miss counts are the same).
func (s *Server) applyCached(ctx context.Context, c *check) error {
	now := s.now().UnixNano()
	if lcGet(s.lc, c, now) {
		return nil
	}
	if c.skip {
		return nil
	}
	if err := s.applyStore(ctx, c); err != nil {
		return err
	}
	if c.over {
		lcPut(s.lc, c, now)
	}
	return nil
}

// applyStore is apply's store call.
func (s *Server) applyStore(ctx context.Context, c *check) error {
	key := c.Request.Key
	if c.Request.Algorithm == ratelimit.FixedWindow && c.QuotaEnd.IsZero() {
		return s.applyEnvoyWindow(ctx, c, key)
	}
	d, err := c.Check.Decide(ctx, s.store, ratelimit.Request{Key: key, Limit: c.Request.Limit, Algorithm: c.Request.Algorithm, N: c.Request.N})
	if err != nil {
		return err
	}
	capacity := max(0, c.Request.Limit.Capacity(c.Request.Algorithm))
	used := capacity - min(capacity, max(0, d.Remaining))
	c.d, c.over, c.remaining = d, !d.Allowed, d.Remaining
	if c.over {
		c.before, c.after = used, used+c.Request.N
		c.remaining = 0
	} else {
		c.before, c.after = max(0, used-c.Request.N), used
	}
	return nil
}

// maxParallel bounds the goroutines one request may start: a request with
// more limited descriptors than this (Envoy sends a handful) applies them
// one after the other.
const maxParallel = 32

// distinctKeys reports whether no two limited checks share a storage key.
// When some do, they must be applied in order, as envoyproxy/ratelimit's
// pipeline applies them.
func distinctKeys(checks []check) bool {
	for i := range checks {
		if checks[i].Kind != kindLimited {
			continue
		}
		for j := i + 1; j < len(checks); j++ {
			if checks[j].Kind == kindLimited && checks[j].Request.Key == checks[i].Request.Key {
				return false
			}
		}
	}
	return true
}

// applyParallel applies the limited checks concurrently, so that a remote
// store sees them at once (one round trip, when it batches) instead of one
// after the other. It returns the first error.
func (s *Server) applyParallel(ctx context.Context, checks []check) error {
	var wg sync.WaitGroup
	errs := make([]error, len(checks))
	first := -1
	for i := range checks {
		if checks[i].Kind != kindLimited {
			continue
		}
		if first < 0 {
			first = i // run on this goroutine, after starting the others
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = s.apply(ctx, &checks[i])
		}(i)
	}
	errs[first] = s.apply(ctx, &checks[first])
	wg.Wait()
	return errors.Join(errs...)
}

// applyEnvoyWindow applies c as envoyproxy/ratelimit's fixed window does:
// it INCRBYs the window's count by the whole hits_addend whatever the
// outcome, and the descriptor is over the limit when the count after the
// increment exceeds the limit, so once any request has overflowed a window
// every later request of it, even a check with hits_addend 0, is over.
//
// Stores do not count what they deny, so the window is kept with one more
// event than the limit: a count of Rate+1 stands for "overflowed". A
// request the store admits is over when it brings the count to Rate+1; a
// request the store denies overflows the window, and what was left is
// consumed so that the count reads Rate+1. The only extra store call is
// that one, for a request costing more than what is left.
func (s *Server) applyEnvoyWindow(ctx context.Context, c *check, key string) error {
	lim := ratelimit.Limit{Rate: c.Request.Limit.Rate + 1, Period: c.Request.Limit.Period}
	d, err := c.Check.Decide(ctx, s.store, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: c.Request.N})
	if err != nil {
		return err
	}
	c.d = d
	count := lim.Rate - min(lim.Rate, max(0, d.Remaining)) // after, when admitted; before, when denied
	if !d.Allowed {
		if d.Remaining > 0 {
			if _, err := c.Check.Decide(ctx, s.store, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: d.Remaining}); err != nil {
				return err
			}
		}
		c.over, c.remaining = true, 0
		c.before, c.after = count, count+c.Request.N
		return nil
	}
	c.over = count > c.Request.Limit.Rate
	c.remaining = max(0, c.Request.Limit.Rate-count)
	c.before, c.after = max(0, count-c.Request.N), count
	return nil
}

// isEnvoyWindow reports whether c is charged by applyEnvoyWindow.
func isEnvoyWindow(c *check) bool {
	return c.Kind == kindLimited && c.Request.Algorithm == ratelimit.FixedWindow && c.QuotaEnd.IsZero()
}

// spareWithinLimit is StopIncrementWhenOverLimit, as envoyproxy/ratelimit's
// Redis fixed window does it: it reads the count of every fixed-window check
// (a store call of no hits), and when any would go over with its hits, it
// sets the outcome of the others from what it read and marks them skip, so
// that apply charges only the ones going over. When none would, it changes
// nothing and every check is charged as usual.
func (s *Server) spareWithinLimit(ctx context.Context, checks []check) error {
	windows := 0
	for i := range checks {
		if isEnvoyWindow(&checks[i]) {
			windows++
		}
	}
	if windows < 2 {
		return nil
	}
	counts := make([]int64, len(checks))
	anyOver := false
	for i := range checks {
		c := &checks[i]
		if !isEnvoyWindow(c) {
			continue
		}
		lim := ratelimit.Limit{Rate: c.Request.Limit.Rate + 1, Period: c.Request.Limit.Period}
		d, err := c.Check.Decide(ctx, s.store, ratelimit.Request{Key: c.Request.Key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: 0})
		if err != nil {
			return err
		}
		c.d = d
		counts[i] = lim.Rate - min(lim.Rate, max(0, d.Remaining))
		if counts[i]+c.Request.N > c.Request.Limit.Rate {
			anyOver = true
			counts[i] = -1 // going over: charged
		}
	}
	if !anyOver {
		return nil
	}
	for i := range checks {
		c := &checks[i]
		if !isEnvoyWindow(c) || counts[i] < 0 {
			continue
		}
		// Within its limit, and not charged: it answers from its count, as
		// upstream answers from an increment of 0.
		count := counts[i]
		c.skip, c.over = true, false
		c.remaining = max(0, c.Request.Limit.Rate-count)
		c.before, c.after = max(0, count-c.Request.N), count
	}
	return nil
}

// hitsOf returns the descriptor's cost: its own hits_addend when set (0
// checks without counting), else the request's, where 0 means 1.
func hitsOf(req *pb.RateLimitRequest, desc *commonpb.RateLimitDescriptor) (int64, error) {
	if desc.GetIsNegativeHits() {
		return 0, requestError("is_negative_hits is not supported")
	}
	if h := desc.GetHitsAddend(); h != nil {
		if h.GetValue() > MaxHitsAddend {
			return 0, requestError("hits_addend %d is above %d", h.GetValue(), uint64(MaxHitsAddend))
		}
		return int64(h.GetValue()), nil
	}
	return max(1, int64(req.GetHitsAddend())), nil
}

// units are Envoy's rate limit units, longest first.
var units = []struct {
	d    time.Duration
	unit pb.RateLimitResponse_RateLimit_Unit
}{
	{365 * 24 * time.Hour, pb.RateLimitResponse_RateLimit_YEAR},
	{30 * 24 * time.Hour, pb.RateLimitResponse_RateLimit_MONTH},
	{7 * 24 * time.Hour, pb.RateLimitResponse_RateLimit_WEEK},
	{24 * time.Hour, pb.RateLimitResponse_RateLimit_DAY},
	{time.Hour, pb.RateLimitResponse_RateLimit_HOUR},
	{time.Minute, pb.RateLimitResponse_RateLimit_MINUTE},
	{time.Second, pb.RateLimitResponse_RateLimit_SECOND},
}

func unitDuration(u typepb.RateLimitUnit) (time.Duration, bool) {
	switch u {
	case typepb.RateLimitUnit_SECOND:
		return time.Second, true
	case typepb.RateLimitUnit_MINUTE:
		return time.Minute, true
	case typepb.RateLimitUnit_HOUR:
		return time.Hour, true
	case typepb.RateLimitUnit_DAY:
		return 24 * time.Hour, true
	case typepb.RateLimitUnit_MONTH:
		return 30 * 24 * time.Hour, true
	case typepb.RateLimitUnit_YEAR:
		return 365 * 24 * time.Hour, true
	}
	return 0, false
}

// overrideLimit converts a descriptor's limit override: a fixed window of
// requests_per_unit per unit (times unit_multiplier).
func overrideLimit(o *commonpb.RateLimitDescriptor_RateLimitOverride) (ratelimit.Limit, error) {
	d, ok := unitDuration(o.GetUnit())
	if !ok {
		return ratelimit.Limit{}, requestError("limit override has unknown unit %v", o.GetUnit())
	}
	if m := o.GetUnitMultiplier(); m != nil {
		if m.GetValue() == 0 {
			return ratelimit.Limit{}, requestError("limit override has unit_multiplier 0")
		}
		if time.Duration(m.GetValue()) > ratelimit.MaxWindow/d {
			return ratelimit.Limit{}, requestError("limit override period %d×%v is too long", m.GetValue(), o.GetUnit())
		}
		d *= time.Duration(m.GetValue())
	}
	lim := ratelimit.Limit{Rate: int64(o.GetRequestsPerUnit()), Period: d}
	if err := lim.Validate(); err != nil {
		return ratelimit.Limit{}, requestError("limit override: %v", err)
	}
	return lim, nil
}

// overrideMetricKey is envoyproxy/ratelimit's stats key for an override:
// "domain.key1_value1.key2" (no '_' for an empty value).
func overrideMetricKey(domain string, entries []rules.Entry) string {
	b := make([]byte, 0, 64)
	b = append(b, domain...)
	for _, e := range entries {
		b = append(b, '.')
		b = append(b, e.Key...)
		if e.Value != "" {
			b = append(b, '_')
			b = append(b, e.Value...)
		}
	}
	return string(b)
}

// currentLimit is the limit as Envoy's RateLimit message says it. A rule
// with an envoyproxy/ratelimit unit, and a limit override, report their
// unit and unit_multiplier as given, as that server does (minute × 60
// stays so, not an hour); a sluice window reports the longest unit
// dividing the period, with unit_multiplier when it is more than one unit.
func currentLimit(rl *pb.RateLimitResponse_RateLimit, c *check) *pb.RateLimitResponse_RateLimit {
	rl.RequestsPerUnit = clamp32(c.Request.Limit.Rate)
	if c.Rule != nil && c.Rule.HasName() {
		rl.Name = c.Rule.Name
	}
	switch {
	case c.Rule != nil && c.Rule.Quota != nil:
		rl.Unit = pb.RateLimitResponse_RateLimit_DAY
		if c.Rule.Quota.Period == rules.QuotaMonth {
			rl.Unit = pb.RateLimitResponse_RateLimit_MONTH
		}
		return rl
	case c.Rule != nil && c.Rule.Unit != "":
		if u := ruleUnit(c.Rule.Unit); u != pb.RateLimitResponse_RateLimit_UNKNOWN {
			rl.Unit = u
			if m := c.Rule.UnitMultiplier; m != 0 {
				rl.UnitMultiplier = wrapU32(m)
			}
			return rl
		}
	case c.Rule == nil && c.unit != pb.RateLimitResponse_RateLimit_UNKNOWN:
		rl.Unit = c.unit
		if c.mult != 0 {
			rl.UnitMultiplier = wrapU32(c.mult)
		}
		return rl
	}
	p := c.Request.Limit.Period
	for _, u := range units {
		if p >= u.d && p%u.d == 0 {
			rl.Unit = u.unit
			if n := p / u.d; n > 1 {
				rl.UnitMultiplier = wrapU32(uint32(min(n, math.MaxUint32)))
			}
			break
		}
	}
	return rl
}

// ruleUnit is the RateLimit unit of a rule's unit (rules.Rule.Unit, lower
// case), or UNKNOWN.
func ruleUnit(u string) pb.RateLimitResponse_RateLimit_Unit {
	switch u {
	case "second":
		return pb.RateLimitResponse_RateLimit_SECOND
	case "minute":
		return pb.RateLimitResponse_RateLimit_MINUTE
	case "hour":
		return pb.RateLimitResponse_RateLimit_HOUR
	case "day":
		return pb.RateLimitResponse_RateLimit_DAY
	case "week":
		return pb.RateLimitResponse_RateLimit_WEEK
	case "month":
		return pb.RateLimitResponse_RateLimit_MONTH
	case "year":
		return pb.RateLimitResponse_RateLimit_YEAR
	}
	return pb.RateLimitResponse_RateLimit_UNKNOWN
}

func clamp32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}

// resetAfter is duration_until_reset: what the store says, or for a fixed
// window nobody has hit, the time to the end of the epoch-aligned window,
// in whole seconds rounded up as envoyproxy/ratelimit reports it.
func (s *Server) resetAfter(c *check) time.Duration {
	r := c.d.ResetAfter
	switch {
	case !c.QuotaEnd.IsZero():
		r = c.QuotaEnd.Sub(s.now())
	case r == 0 && c.Request.Algorithm == ratelimit.FixedWindow && c.Request.Limit.Period > 0:
		p := int64(c.Request.Limit.Period)
		r = time.Duration(p - s.now().UnixNano()%p)
	}
	return time.Duration(ratelimit.DurationCeil(r)) * time.Second
}

// statusBlock is one descriptor's status, limit and reset, allocated
// together.
type statusBlock struct {
	st    pb.RateLimitResponse_DescriptorStatus
	limit pb.RateLimitResponse_RateLimit
	reset durationpb.Duration
}

// singleResponse is the whole response to a request of one descriptor (what
// Envoy mostly sends), in one allocation.
type singleResponse struct {
	resp     pb.RateLimitResponse
	statuses [1]*pb.RateLimitResponse_DescriptorStatus
	block    [1]statusBlock
}

func (s *Server) respond(checks []check) *pb.RateLimitResponse {
	var (
		resp   *pb.RateLimitResponse
		blocks []statusBlock
	)
	if len(checks) == 1 {
		one := &singleResponse{}
		resp, blocks = &one.resp, one.block[:]
		resp.Statuses = one.statuses[:]
	} else {
		// One allocation for every descriptor's status, limit and reset.
		resp = &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(checks))}
		blocks = make([]statusBlock, len(checks))
	}
	resp.OverallCode = pb.RateLimitResponse_OK
	// envoyproxy/ratelimit since #1059: the answer is OVER_LIMIT when any
	// regular descriptor is over, or when there are quota_mode descriptors
	// and every one of them is over; a quota_mode descriptor over its limit
	// says OVER_LIMIT in its own status either way.
	regularOver, quotaOver, quotaTotal := 0, 0, 0
	for i := range checks {
		c := &checks[i]
		b := &blocks[i]
		st := &b.st
		resp.Statuses[i] = st
		st.Code = pb.RateLimitResponse_OK
		switch c.Kind {
		case kindNone:
			if s.quota {
				quotaTotal++
			}
			continue
		case kindUnlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		}
		st.CurrentLimit = currentLimit(&b.limit, c)
		b.reset.Seconds = int64(s.resetAfter(c) / time.Second)
		st.DurationUntilReset = &b.reset
		quota := s.quota || (c.Rule != nil && c.Rule.QuotaMode)
		if quota {
			quotaTotal++
		}
		if c.over {
			switch {
			case c.Shadow:
				// Counted and reported, answered OK (and, for a quota_mode
				// rule, not one of the quota descriptors over).
			case quota:
				st.Code = pb.RateLimitResponse_OVER_LIMIT
				quotaOver++
			default:
				st.Code = pb.RateLimitResponse_OVER_LIMIT
				regularOver++
			}
		} else {
			st.LimitRemaining = clamp32(c.remaining)
		}
	}
	if regularOver > 0 || (quotaTotal > 0 && quotaOver == quotaTotal) {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	if s.headers != header.Off {
		resp.ResponseHeadersToAdd = s.responseHeaders(checks, resp)
	}
	if s.shadow && resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		resp.OverallCode = pb.RateLimitResponse_OK
		s.m.globalShadow.Inc()
	}
	return resp
}

func headerValue(k, v string) *corepb.HeaderValue { return &corepb.HeaderValue{Key: k, Value: v} }
