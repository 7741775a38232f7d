package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/h2grpc"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// rlsGCPercent is --gc-percent's default: under bench/rls's load it cut
// the server's CPU per request by about 13% against GOGC=100, for a heap
// of about five times the live one instead of twice. That was measured
// with grpc-go's server, whose allocations were most of the process's (a
// few KB a call); the lean server allocates less (92 against 141 allocs a
// call in h2grpc's BenchmarkUnary) and the gain has not been measured
// again with it.
const rlsGCPercent = 400

const rlsSynopsis = "--config-dir DIR [--grpc-listen ADDR] [--http-listen ADDR] [--store URL] [flags]"

func runRLS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rls", rlsSynopsis, stderr)
	configDir := fs.String("config-dir", "", "`DIR`ectory of envoyproxy/ratelimit YAML files (every *.yaml and *.yml), reloaded when they change")
	grpcListen := fs.String("grpc-listen", ":8081", "gRPC `ADDR`ess (envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health)")
	httpListen := fs.String("http-listen", ":8080", "HTTP `ADDR`ess (POST /json, /healthcheck, /metrics); empty disables it")
	storeURL := fs.String("store", "memory", "where counters live: memory, or a redis://, rediss://, unix:// or redis-cluster://host:port,host:port `URL`")
	storeTimeout := fs.Duration("store-timeout", redisstore.DefaultTimeout, "bound on each Redis call; past it the call fails and --on-store-error applies (envoyproxy/ratelimit's REDIS_TIMEOUT is 10s; Envoy's filter gives up after 20ms by default)")
	denyCache := fs.Bool("deny-cache", false, "with Redis, remember over-limit keys in process until their window ends and answer them without a round trip (envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES)")
	onError := fs.String("on-store-error", "error", "what to answer when Redis cannot decide: error (Envoy's failure_mode_deny then decides), allow, deny or local (a per-instance memory store)")
	headers := fs.String("headers", "off", "response_headers_to_add: off, ietf (RateLimit-Policy, RateLimit, Retry-After) or legacy (X-RateLimit-Limit, -Remaining, -Reset)")
	poll := fs.Duration("poll", rls.DefaultPollInterval, "how often to look for config changes")
	parallel := fs.Bool("parallel-descriptors", true, "with Redis, apply the descriptors of one request concurrently (one round trip) rather than one after the other")
	shadow := fs.Bool("shadow-mode", false, "answer every request OK while counting as usual (envoyproxy/ratelimit's SHADOW_MODE)")
	gcPercent := fs.Int("gc-percent", rlsGCPercent, "the Go garbage collector's target `PERCENT` (as GOGC): the server's live heap is a few MB, so a larger target spends a few MB more on less collection CPU; 0 keeps the runtime's (GOGC, else 100)")
	debugListen := fs.String("debug-listen", "", "`ADDR`ess serving Go's /debug/pprof/ profiles (e.g. 127.0.0.1:6060); empty (the default) disables it")
	maxDetailed := fs.Int("max-detailed-series", rls.DefaultMaxDetailedSeries, "metric keys each detailed_metric or value_to_metric rule may get from request values; later values count under <key>.__overflow__ (negative: none)")
	nearRatio := fs.Float64("near-limit-ratio", rls.DefaultNearLimitRatio, "fraction of a limit past which hits count as near_limit")
	grpcServer := fs.String("grpc-server", "lean", "the gRPC server: lean (sluice's own HTTP/2 server for the rate limit and health services' calls, a fraction of grpc-go's CPU per call) or grpc-go")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *configDir == "" {
		fs.Usage()
		return fmt.Errorf("%w: --config-dir is required", errUsage)
	}
	hm, err := rls.ParseHeaderMode(*headers)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	policy, err := redisstore.ParsePolicy(*onError)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *grpcServer != "lean" && *grpcServer != "grpc-go" {
		return fmt.Errorf("%w: --grpc-server %q: want lean or grpc-go", errUsage, *grpcServer)
	}
	if *gcPercent < 0 {
		return fmt.Errorf("%w: --gc-percent %d is negative", errUsage, *gcPercent)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	// The first config must be good: there is no previous one to keep.
	set, err := rules.LoadDir(*configDir)
	if err != nil {
		return fmt.Errorf("rls: config: %w", err)
	}

	store, closeStore, err := openRLSStore(ctx, *storeURL, redisstore.Options{OnError: policy, Timeout: *storeTimeout, DenyCache: *denyCache}, log)
	if err != nil {
		return err
	}
	defer closeStore()

	srv, err := rls.New(store, set, rls.Options{Logger: log, Headers: hm, NearLimitRatio: *nearRatio, MaxDetailedSeries: *maxDetailed,
		ParallelDescriptors: *parallel && *storeURL != "memory", ShadowMode: *shadow})
	if err != nil {
		return err
	}
	defer srv.Close()
	if rs, ok := store.(*redisstore.Store); ok {
		if err := registerRedisStats(srv.Registry(), rs); err != nil {
			return err
		}
	}
	// Load again through the server so that Watch starts from what it read
	// and the load is counted.
	if err := srv.Load(*configDir); err != nil {
		return fmt.Errorf("rls: config: %w", err)
	}

	gln, err := net.Listen("tcp", *grpcListen)
	if err != nil {
		return fmt.Errorf("rls: grpc: %w", err)
	}
	var hln, dln net.Listener
	if *httpListen != "" {
		if hln, err = net.Listen("tcp", *httpListen); err != nil {
			gln.Close()
			return fmt.Errorf("rls: http: %w", err)
		}
	}
	if *debugListen != "" {
		if dln, err = net.Listen("tcp", *debugListen); err != nil {
			gln.Close()
			if hln != nil {
				hln.Close()
			}
			return fmt.Errorf("rls: debug: %w", err)
		}
	}

	if *gcPercent > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(*gcPercent))
	}
	var g grpcServerImpl
	if *grpcServer == "lean" {
		g = h2grpc.NewServer(h2grpc.Options{Logger: log})
	} else {
		g = grpc.NewServer(rls.ServerOptions()...)
	}
	srv.Register(g)
	var hs *http.Server
	if hln != nil {
		hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	}
	var ds *http.Server
	if dln != nil {
		ds = &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: 10 * time.Second}
	}

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.Watch(wctx, *configDir, *poll)
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
	serve("grpc", func() error { return g.Serve(gln) })
	if hs != nil {
		serve("http", func() error { return hs.Serve(hln) })
	}
	if ds != nil {
		serve("debug", func() error { return ds.Serve(dln) })
	}
	attrs := []any{"grpc", gln.Addr().String(), "config_dir", *configDir, "domains", set.Domains(),
		"store", redactStoreURL(*storeURL), "headers", hm.String(), "grpc_server", *grpcServer}
	if hln != nil {
		attrs = append(attrs, "http", hln.Addr().String())
	}
	if dln != nil {
		attrs = append(attrs, "debug", dln.Addr().String())
	}
	log.Info("sluice rls: listening", attrs...)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	// Drain: report NOT_SERVING, finish requests in flight, stop.
	srv.Shutdown()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if hs != nil {
		hs.Shutdown(sctx)
	}
	if ds != nil {
		ds.Shutdown(sctx)
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		g.Stop()
	}
	wg.Wait()
	log.Info("sluice rls: stopped")
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

// pprofHandler serves net/http/pprof's profiles under /debug/pprof/.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// registerRedisStats exports the Redis store's batching counters:
// sluice_redis_requests_total / sluice_redis_script_calls_total is the
// mean batch, which decides what each decision costs.
func registerRedisStats(reg prometheus.Registerer, s *redisstore.Store) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "redis", Name: "script_calls_total",
			Help: "Script calls sent to Redis (each decides a batch of requests)."},
			func() float64 { return float64(s.Stats().ScriptCalls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "redis", Name: "requests_total",
			Help: "Requests decided by Redis, in all script calls."},
			func() float64 { return float64(s.Stats().Requests) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// openRLSStore opens the store named by raw: "memory" or a Redis URL.
func openRLSStore(ctx context.Context, raw string, opts redisstore.Options, log *slog.Logger) (ratelimit.Store, func(), error) {
	if raw == "memory" || raw == "" {
		s := memstore.New(memstore.Options{})
		return s, func() { s.Close() }, nil
	}
	opts.OnFailure = func(err error) {
		log.Warn("sluice rls: redis failed", "err", err, "policy", opts.OnError.String())
	}
	s, err := redisstore.Open(ctx, raw, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("rls: store: %w", err)
	}
	return s, func() { s.Close() }, nil
}

// redactStoreURL hides a store URL's password, also in a
// redis-cluster:// host list, which net/url cannot parse.
func redactStoreURL(raw string) string {
	scheme := strings.Index(raw, "://")
	if scheme < 0 {
		return raw
	}
	rest := raw[scheme+3:]
	if slash := strings.IndexAny(rest, "/?"); slash >= 0 {
		rest = rest[:slash]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 {
		return raw
	}
	start := scheme + 3 + colon + 1
	return raw[:start] + "xxxxx" + raw[scheme+3+at:]
}
