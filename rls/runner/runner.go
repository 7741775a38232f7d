// Package runner assembles sluice rls from its configuration: the
// command line (Config and its flags, envoyproxy/ratelimit's environment
// variables: env.go) to the store (storeurl, on one client), the server
// (rls.New), its rules' source (files or xDS), the gRPC server (h2grpc's
// or grpc-go's) and the listeners, statsd and the admin API, and the
// drain on shutdown: what cmd/sluice's serve finds in package gateway.
package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/admin"
	"github.com/sluicehq/sluice/internal/server/gctune"
	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/internal/transport/h2grpc"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/storeurl"
)

// rlsGCPercent is --gc-percent's default: under bench/rls's load it cut
// the server's CPU per request by about 13% against GOGC=100, for a heap
// of about five times the live one instead of twice. That was measured
// with grpc-go's server, whose allocations were most of the process's (a
// few KB a call); the lean server allocates less (92 against 141 allocs a
// call in h2grpc's BenchmarkUnary) and the gain has not been measured
// again with it.
const rlsGCPercent = 400

// ErrUsage marks an error of the configuration: a flag's value refused
// (the command's exit status 2, with its usage).
var ErrUsage = errors.New("usage")

// Run serves f, checked (Check), until ctx is done, then drains (at most
// DrainTimeout): New, Serve and Close. log receives the server's logs.
func Run(ctx context.Context, f *Config, log *slog.Logger) error {
	r, err := New(ctx, f, log)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Serve(ctx)
}

// RLS is sluice rls assembled from a Config: the store (storeurl), the
// statsd sink, and the server (rls.New) with its rules loaded and their
// source (files or xDS) ready to follow. Serve listens; Close releases it.
type RLS struct {
	f     *Config
	log   *slog.Logger
	store *storeurl.Store
	sd    *rls.Statsd
	srv   *rls.Server
	set   *rules.Set // the rules at start, for the start line

	access  *accesslog.Log // --access-log; nil: none
	accessW io.Closer
	tracer  *tracing.Tracer // --tracing; nil: none
}

// New opens f's store and builds the server with f's rules (which must
// load: there is no previous config to keep). With Redis down, it starts
// anyway, --on-store-error answering until Redis is back.
func New(ctx context.Context, f *Config, log *slog.Logger) (*RLS, error) {
	r := &RLS{f: f, log: log}
	if err := r.open(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *RLS) open(ctx context.Context) error {
	f, log := r.f, r.log
	if f.denyCache {
		log.Warn("sluice rls: --deny-cache is deprecated: it turns on the local over-limit cache, one cache on any store (--local-cache-size-bytes)", "local-cache-size-bytes", f.stats.localCacheSize)
	}
	// The first config must be good: there is no previous one to keep.
	set, err := f.initialRules()
	if err != nil {
		return err
	}
	r.set = set
	store, err := storeurl.Open(ctx, f.store, storeurl.Options{MaxKeys: f.maxKeys, Logger: log,
		Redis: redisstore.Options{OnError: f.onError, Timeout: f.storeTimeout, Prefix: f.keyPrefix,
			OnFailure: func(err error) { log.Warn("sluice rls: redis failed", "err", err, "policy", f.onError.String()) }}})
	if err != nil {
		return fmt.Errorf("rls: %w", err)
	}
	r.store = store
	if r.sd, err = f.stats.dial(log); err != nil {
		return err
	}
	// Rules with prefetch: true decide through the Redis store's prefetch view
	// (made on first use, closed with the store); on the memory store they
	// are exact, with a warning.
	var prefetched ratelimit.Store
	if store.Redis != nil {
		l, err := store.PrefetchView()
		if err != nil {
			return fmt.Errorf("rls: %w", err)
		}
		prefetched = l
	}
	if r.access, r.accessW, err = f.access.open(); err != nil {
		return err
	}
	if r.tracer, err = f.trace.open(ctx, log, r.access, f.access.keyFile); err != nil {
		return err
	}
	srv, err := rls.New(store, set, rls.Options{AccessLog: r.access, Tracer: r.tracer, Prefetch: prefetched, Statsd: r.sd, LocalCacheSize: f.stats.localCacheSize, Logger: log, ResponseDynamicMetadata: f.dynMeta, Headers: f.headers, NearLimitRatio: f.nearRatio, MaxDetailedSeries: f.maxDetailed,
		ParallelDescriptors: f.parallel && store.Redis != nil, ShadowMode: f.shadow, StoreStatus: store.Ready,
		MetricLabels: f.metricLabels, HeaderNames: f.headerNames, StopIncrementWhenOverLimit: f.stopIncrement,
		QuotaMode: f.quotaMode, HealthyWithConfig: f.healthyWithConfig})
	if err != nil {
		return err
	}
	r.srv = srv
	if err := store.Register(srv.Registry()); err != nil {
		return err
	}
	if err := rls.RegisterAccessLog(srv.Registry(), r.access); err != nil {
		return err
	}
	if err := admin.RegisterRuntime(srv.Registry()); err != nil {
		return err
	}
	if err := setRLSAdmin(srv, store, f.adminTokenFile, f.onError); err != nil {
		return err
	}
	// Load again through the server so that Watch starts from what it read
	// and the load is counted.
	return f.startRules(srv, log)
}

// Server is the rate limit service.
func (r *RLS) Server() *rls.Server { return r.srv }

// Serve listens on the Config's addresses and serves until ctx is done or
// a server fails, then drains (DrainTimeout at most).
func (r *RLS) Serve(ctx context.Context) error {
	f, log, srv := r.f, r.log, r.srv
	lns, err := f.listen()
	if err != nil {
		return err
	}
	defer f.gc.Apply()()
	tr, err := f.tr.transport(log, srv.Registry())
	if err != nil {
		return err
	}
	g := f.grpcServer(log, tr)
	reg := newServices(g)
	srv.Register(reg)
	if f.reflection {
		registerReflection(reg)
	}
	attrs := append(lns.attrs(), "config_type", f.xds.configType, "config_dir", f.configDir, "domains", r.set.Domains(),
		"store", r.store.URL(), "headers", f.headers.String(), "grpc_server", f.grpc, "grpc_tls", f.tr.mode(), "grpc_reflection", f.reflection)
	if r.tracer != nil {
		attrs = append(attrs, "tracing", r.tracer.Protocol())
	}
	log.Info("sluice rls: listening", attrs...)
	err = serveUntilDone(ctx, f, srv, g, lns)
	log.Info("sluice rls: stopped")
	return err
}

// Close releases the server, then the statsd sink, then the store.
func (r *RLS) Close() error {
	var errs []error
	if r.srv != nil {
		errs = append(errs, r.srv.Close())
	}
	if r.access != nil { // after the server: its last lines
		errs = append(errs, r.access.Close(), r.accessW.Close())
	}
	if r.tracer != nil { // after the server: its last spans
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := r.tracer.Shutdown(ctx); err != nil {
			r.log.Warn("sluice rls: tracing: last spans not exported", "err", err)
		}
		cancel()
	}
	if r.sd != nil {
		errs = append(errs, r.sd.Close())
	}
	if r.store != nil {
		errs = append(errs, r.store.Close())
	}
	return errors.Join(errs...)
}

// DenyCacheSize is the local over-limit cache that the deprecated
// --deny-cache turns on when --local-cache-size-bytes is not given: the
// Redis store's DenyCacheSize (65536 entries) of short keys.
const DenyCacheSize = redisstore.DefaultDenyCacheSize * rls.LocalCacheEntryOverhead

// Config is sluice rls's configuration: its command line, each field a
// flag (AddFlags), checked by Check.
type Config struct {
	configDir, grpcListen, httpListen, debugListen, store, grpc string
	keyPrefix                                                   string
	adminTokenFile                                              string
	storeTimeout                                                time.Duration
	denyCache, parallel, shadow, stopIncrement, quotaMode       bool
	dynMeta                                                     bool
	onError                                                     ratelimit.FailurePolicy
	headers                                                     header.Mode
	poll                                                        time.Duration
	maxDetailed, maxKeys, maxConns                              int
	nearRatio                                                   float64
	metricLabels                                                rls.MetricLabels
	headerNames                                                 header.Names
	metricsListen                                               string
	healthyWithConfig, reflection                               bool
	stats                                                       rlsStatsFlags
	tr                                                          grpcTransportFlags
	xds                                                         rlsXDSFlags
	access                                                      rlsAccessLogFlags
	gc                                                          gctune.Policy
	trace                                                       rlsTracingFlags
	text                                                        rlsFlagText
}

// Where reports what the flags name: the rules' directory and the HTTP
// and gRPC listen addresses (for deploy checks and start-up lines).
func (f *Config) Where() (configDir, httpListen, grpcListen string) {
	return f.configDir, f.httpListen, f.grpcListen
}

// AddFlags declares f's flags on fs; Check reads them once fs is parsed.
func (f *Config) AddFlags(fs *flag.FlagSet) {
	f.text = f.define(fs)
}

// Check validates the flags once parsed and reads those given as text.
func (f *Config) Check() error {
	if err := f.tr.check(); err != nil {
		return err
	}
	if err := f.stats.check(); err != nil {
		return err
	}
	if f.denyCache && f.stats.localCacheSize == 0 {
		f.stats.localCacheSize = DenyCacheSize
	}
	if err := f.access.check(); err != nil {
		return err
	}
	if err := f.trace.check(); err != nil {
		return err
	}
	if err := f.xds.check(f.configDir); err != nil {
		return err
	}
	if err := f.resolve(f.text); err != nil {
		return err
	}
	if err := f.checkBounds(); err != nil {
		return err
	}
	return nil
}

// rlsFlagText holds the flags that are parsed into Config once the
// command line has been read.
type rlsFlagText struct {
	onError, headers, limitHeaderNames, metricLabels *string
	storePW                                          *StorePassword
}

// define declares sluice rls's flags on fs, into f or, for those parsed
// afterwards by resolve, into the returned rlsFlagText.
func (f *Config) define(fs *flag.FlagSet) rlsFlagText {
	var text rlsFlagText
	fs.StringVar(&f.configDir, "config-dir", "", "`DIR`ectory of envoyproxy/ratelimit YAML files (every *.yaml and *.yml), reloaded when they change")
	fs.StringVar(&f.grpcListen, "grpc-listen", ":8081", "gRPC `ADDR`ess (envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health)")
	fs.StringVar(&f.httpListen, "http-listen", ":8080", "HTTP `ADDR`ess (POST /json, /healthcheck, /readyz, /metrics); empty disables it")
	fs.StringVar(&f.store, "store", storeurl.Memory, "where counters live: memory, or a redis://, rediss://, unix:// or redis-cluster://host:port,host:port `URL`; with Redis down at start, the server starts and --on-store-error answers until it is back; ?layout=packed keeps the buckets' and windows' states in shared hashes, a fifth to a third of the memory (docs/redis.md)")
	fs.IntVar(&f.maxKeys, "max-keys", memstore.DefaultMaxKeys, "with the memory store, the most keys held: past it, keys back to full are dropped first and keys holding a denial or a used quota never, a new key being refused (--on-store-error) instead")
	fs.DurationVar(&f.storeTimeout, "store-timeout", redisstore.DefaultTimeout, "bound on each Redis call, from when it is queued; past it the call fails and --on-store-error applies (envoyproxy/ratelimit's REDIS_TIMEOUT is 10s; Envoy's filter gives up after 20ms by default)")
	fs.StringVar(&f.keyPrefix, "key-prefix", redisstore.DefaultPrefix, "with Redis, the `PREFIX` of every key (envoyproxy/ratelimit's CACHE_KEY_PREFIX): fleets that share one Redis and must not share counters take different prefixes; no '{' or '}'")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "`FILE` holding the bearer token of the admin API on the HTTP listener (/admin/: reset, override, enforce); without it $SLUICE_ADMIN_TOKEN; without either the API is refused. /status and /status.json are served either way")
	fs.BoolVar(&f.dynMeta, "response-dynamic-metadata", false, "add envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA to every answer: the domain, the descriptors and the merged metadata of the rules that passed")
	fs.BoolVar(&f.denyCache, "deny-cache", false, "deprecated: the local over-limit cache, as --local-cache-size-bytes 8388608 when that is not given (the Redis store's own cache of denials before; one cache now, on any store, with its stats)")
	text.onError = fs.String("on-store-error", "error", "what to answer when the store cannot decide: error (Envoy's failure_mode_deny then decides), allow, deny or local (a per-instance memory store)")
	text.headers = fs.String("headers", "off", "response_headers_to_add: off, ietf (RateLimit-Policy, RateLimit, Retry-After) legacy (X-RateLimit-Limit, -Remaining, -Reset in seconds, Retry-After) or envoy (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED: legacy's choice as RateLimit-Limit, -Remaining, -Reset, no Retry-After)")
	text.limitHeaderNames = fs.String("limit-header-names", "", "`LIMIT,REMAINING,RESET`: rename the three headers of --headers legacy or envoy (envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER); an empty part keeps its name")
	fs.DurationVar(&f.poll, "poll", rls.DefaultPollInterval, "how often to look for config changes")
	fs.BoolVar(&f.parallel, "parallel-descriptors", true, "with Redis, apply the descriptors of one request concurrently (one round trip) rather than one after the other")
	fs.BoolVar(&f.stopIncrement, "stop-increment-when-over-limit", false, "when one fixed-window descriptor of a request would go over its limit, do not charge the request's others (envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT; one more store read per such descriptor)")
	fs.BoolVar(&f.quotaMode, "quota-mode", false, "put every rule in quota_mode: a request is denied only when all its limited descriptors are over (envoyproxy/ratelimit's QUOTA_MODE)")
	fs.BoolVar(&f.shadow, "shadow-mode", false, "answer every request OK while counting as usual (envoyproxy/ratelimit's SHADOW_MODE)")
	f.gc = gctune.Policy{GCPercent: rlsGCPercent}
	f.gc.AddFlags(fs)
	fs.IntVar(&f.maxConns, "max-connections", 1024, "most connections open at once on each of the gRPC and HTTP listeners; past it, new connections wait in the listen backlog until one closes (each gRPC connection may hold up to about 40 MiB: see docs/security.md)")
	fs.StringVar(&f.debugListen, "debug-listen", "", "`ADDR`ess serving Go's /debug/pprof/ profiles (e.g. 127.0.0.1:6060); empty (the default) disables it")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "`ADDR`ess serving /metrics alone, besides --http-listen's (envoyproxy/ratelimit's PROMETHEUS_ADDR); empty (the default): none")
	fs.IntVar(&f.maxDetailed, "max-detailed-series", rls.DefaultMaxDetailedSeries, "metric keys each detailed_metric or value_to_metric rule may get from request values; later values count under <key>.__overflow__ (negative: none)")
	fs.Float64Var(&f.nearRatio, "near-limit-ratio", rls.DefaultNearLimitRatio, "fraction of a limit past which hits count as near_limit")
	text.metricLabels = fs.String("metric-labels", "envoy", "labels of the per-rule metrics: envoy (domain, key1, key2, as envoyproxy/ratelimit's Prometheus mapping, so its dashboards work) or sluice (domain and the whole key)")
	fs.StringVar(&f.grpc, "grpc-server", "lean", "the gRPC server: lean (sluice's own HTTP/2 server for the rate limit and health services' calls, a fraction of grpc-go's CPU per call) or grpc-go")
	fs.BoolVar(&f.reflection, "grpc-reflection", false, "serve gRPC server reflection (grpc.reflection.v1 and v1alpha) on --grpc-listen, so that grpcurl and the like list, describe and call the services without their proto files; off by default: it tells any client what the server serves. On either --grpc-server; on the lean one a reflection stream's requests are at most 65530 bytes, each within --grpc-request-timeout of the last, and a connection has at most 8 such streams open")
	fs.BoolVar(&f.healthyWithConfig, "healthy-with-config", false, "report not serving (gRPC health, /healthcheck, /readyz) until the configuration has a domain (envoyproxy/ratelimit's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)")
	text.storePW = AddStorePasswordFlags(fs)
	f.stats.add(fs)
	f.tr.add(fs)
	f.xds.add(fs)
	f.access.add(fs)
	f.trace.add(fs)
	return text
}

// resolve parses the flags define left as text into f.
func (f *Config) resolve(text rlsFlagText) error {
	var err error
	if f.store, err = text.storePW.Apply(f.store); err != nil {
		return err
	}
	if *text.headers == "envoy" {
		f.headers, f.headerNames = header.Legacy, header.EnvoyNames
	} else if f.headers, err = header.ParseMode(*text.headers); err != nil {
		return fmt.Errorf("%w: %v (or envoy)", ErrUsage, err)
	}
	if err := parseLimitHeaderNames(*text.limitHeaderNames, &f.headerNames); err != nil {
		return err
	}
	if f.metricLabels, err = rls.ParseMetricLabels(*text.metricLabels); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if f.onError, err = ratelimit.ParseFailurePolicy(*text.onError); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// parseLimitHeaderNames renames names' headers after --limit-header-names
// (LIMIT,REMAINING,RESET; an empty part keeps its name, empty v all).
func parseLimitHeaderNames(v string, names *header.Names) error {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return fmt.Errorf("%w: --limit-header-names %q: want three names, LIMIT,REMAINING,RESET", ErrUsage, v)
	}
	for i, dst := range []*string{&names.Limit, &names.Remaining, &names.Reset} {
		if n := strings.TrimSpace(parts[i]); n != "" {
			if !httpguts.ValidHeaderFieldName(n) {
				return fmt.Errorf("%w: --limit-header-names: %q is not a valid header name", ErrUsage, n)
			}
			*dst = n
		}
	}
	return nil
}

// checkBounds refuses the flags out of their range.
func (f *Config) checkBounds() error {
	if f.grpc != "lean" && f.grpc != "grpc-go" {
		return fmt.Errorf("%w: --grpc-server %q: want lean or grpc-go", ErrUsage, f.grpc)
	}
	if err := f.gc.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if f.maxConns < 1 {
		return fmt.Errorf("%w: --max-connections %d: want at least 1", ErrUsage, f.maxConns)
	}
	if f.maxKeys < 1024 || f.maxKeys > 1<<30 {
		// As the gateway's max_keys: a bound, never none (negative would
		// mean unbounded to memstore).
		return fmt.Errorf("%w: --max-keys %d: want 1024 to %d", ErrUsage, f.maxKeys, 1<<30)
	}
	if strings.ContainsAny(f.keyPrefix, "{}") {
		return fmt.Errorf("%w: --key-prefix %q: no '{' or '}' (sluice hash-tags keys itself)", ErrUsage, f.keyPrefix)
	}
	return nil
}

// rlsListeners are sluice rls's listeners; http and debug may be nil.
type rlsListeners struct{ grpc, http, debug, metrics net.Listener }

func (f *Config) listen() (*rlsListeners, error) {
	var l rlsListeners
	var err error
	closeAll := func() {
		for _, ln := range []net.Listener{l.grpc, l.http, l.debug, l.metrics} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	if l.grpc, err = net.Listen("tcp", f.grpcListen); err != nil {
		return nil, fmt.Errorf("rls: grpc: %w", err)
	}
	// h2grpc's keeps the sockets of TCP connections within its reach.
	l.grpc = h2grpc.LimitListener(l.grpc, f.maxConns)
	if f.httpListen != "" {
		if l.http, err = net.Listen("tcp", f.httpListen); err != nil {
			closeAll()
			return nil, fmt.Errorf("rls: http: %w", err)
		}
		l.http = netutil.LimitListener(l.http, f.maxConns)
	}
	if f.debugListen != "" {
		if l.debug, err = net.Listen("tcp", f.debugListen); err != nil {
			closeAll()
			return nil, fmt.Errorf("rls: debug: %w", err)
		}
	}
	if f.metricsListen != "" {
		if l.metrics, err = net.Listen("tcp", f.metricsListen); err != nil {
			closeAll()
			return nil, fmt.Errorf("rls: metrics: %w", err)
		}
	}
	return &l, nil
}

func (l *rlsListeners) attrs() []any {
	attrs := []any{"grpc", l.grpc.Addr().String()}
	if l.http != nil {
		attrs = append(attrs, "http", l.http.Addr().String())
	}
	if l.debug != nil {
		attrs = append(attrs, "debug", l.debug.Addr().String())
	}
	if l.metrics != nil {
		attrs = append(attrs, "metrics", l.metrics.Addr().String())
	}
	return attrs
}

// grpcServer is the gRPC server --grpc-server names. Both bound what one
// connection may hold: h2grpc by its defaults (see its package doc),
// grpc-go by rls.ServerOptions.
func (f *Config) grpcServer(log *slog.Logger, tr rls.Transport) grpcServerImpl {
	o := leanOptions(tr, log)
	if f.trace.on {
		o.Metadata = tracing.Headers // grpc-go's handlers have all the metadata
	}
	if f.grpc == "lean" {
		return h2grpc.NewServer(o)
	}
	return grpc.NewServer(tr.GRPCOptions(func(c credentials.TransportCredentials) credentials.TransportCredentials {
		return h2grpc.Guard(c, o)
	})...)
}

// DrainTimeout bounds sluice rls's drain: requests in flight get this
// long to finish after SIGTERM. The deploy artefacts stop it after this
// plus a margin (TestDeployStopTimeouts).
const DrainTimeout = 10 * time.Second

// serveUntilDone serves until ctx is done or a server fails, then drains:
// NOT_SERVING first, then requests in flight finish (DrainTimeout at
// most).
func serveUntilDone(ctx context.Context, f *Config, srv *rls.Server, g grpcServerImpl, l *rlsListeners) error {
	var hs, ds *http.Server
	if l.http != nil {
		hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 75 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: srv.ErrorLog("http-listen")}
	}
	if l.debug != nil {
		ds = &http.Server{Handler: srv.DebugHandler(admin.Pprof()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 75 * time.Second,
			ErrorLog: srv.ErrorLog("debug-listen")}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	ms := metricsServer(srv, l.metrics)
	errc := make(chan error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.watchRules(wctx, srv)
	}()
	// serve runs one listener's server until it stops; an error other than
	// its closing ends the command.
	serve := func(name string, run func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("rls: %s: %w", name, err)
			}
		}()
	}
	serve("grpc", func() error { return g.Serve(l.grpc) })
	if hs != nil {
		serve("http", func() error { return hs.Serve(l.http) })
	}
	if ds != nil {
		serve("debug", func() error { return ds.Serve(l.debug) })
	}
	if ms != nil {
		serve("metrics", func() error { return ms.Serve(l.metrics) })
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	srv.Shutdown()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	if hs != nil {
		hs.Shutdown(sctx)
	}
	if ds != nil {
		ds.Shutdown(sctx)
	}
	if ms != nil {
		ms.Shutdown(sctx)
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		g.Stop()
	}
	wg.Wait()
	return err
}

// grpcServerImpl is what rls needs of a gRPC server: grpc-go's and
// h2grpc's.
type grpcServerImpl interface {
	grpc.ServiceRegistrar
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}
