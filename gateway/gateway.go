package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/admin"
	"github.com/sluicehq/sluice/internal/server/eventlog"
	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/internal/tick"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/storeurl"
)

// Options configures a Gateway. The zero value is a good default.
type Options struct {
	// Logger receives the gateway's logs. Nil discards them.
	Logger *slog.Logger
	// Registry receives the gateway's metrics and is served on /metrics.
	// Nil means a new registry of the gateway's own.
	Registry *prometheus.Registry
	// Now is the clock of the utilization shedder (shedding.utilization);
	// nil means time.Now. Tests set it to drive the ramp.
	Now func() time.Time
	// Store, when not "", is the store URL in place of the config's store
	// (sluice serve --store), at start and for every reload.
	Store string
}

// Gateway is a rate limiting reverse proxy: the public handler limits each
// request by its route's rules and proxies it upstream, and the admin
// handler serves /metrics, /healthz and /readyz. Its config can be swapped
// while it serves (Reload); limiter state lives in the store and survives
// the swap. A Gateway is safe for concurrent use; Close releases it.
type Gateway struct {
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics
	refusals *refusals // 401s by reason (unauthorized.go)
	conns    *connMetrics

	store    ratelimit.Store
	st       *storeurl.Store
	mem      *memstore.Store // when the store is memory
	closeFn  func() error    // closes the store
	snapFile string

	cur      atomic.Pointer[state]
	draining atomic.Bool
	reloadMu sync.Mutex

	events    *eventlog.Log  // store failures and denials, aggregated per rule
	access    *accesslog.Log // access_log: nil when off (accesslog.go)
	accessW   io.Closer
	tracer    *tracing.Tracer // tracing: nil when off (tracing.go)
	ops       *ops            // /status, the admin API, /rate_limit (status.go)
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// conc holds the in-flight store, the utilization shedder and the
	// adaptive limiters across reloads (concurrency.go); now is Options.Now.
	conc *concurrency
	now  func() time.Time

	jwks jwksCache // identity.jwt.jwks_url's keys, across reloads (jwt.go)
	// storeURL is Options.Store: the store in place of the config's.
	storeURL string
}

// StoreURL returns the URL of the store the gateway serves with cfg:
// Options.Store, else cfg's store.
func (g *Gateway) StoreURL(cfg *Config) string { return cmp.Or(g.storeURL, cfg.Store) }

// state is one config and the handler built from it.
type state struct {
	cfg       *Config
	handler   http.Handler
	upstreams []*upstreamLink // the top-level upstream first, then upstreams (upstreams.go)
}

// New returns a Gateway serving cfg: it opens the store (restoring the
// memory store's snapshot when there is one) and builds the handlers.
func New(ctx context.Context, cfg *Config, opts Options) (*Gateway, error) {
	g := &Gateway{log: opts.Logger, registry: opts.Registry, now: opts.Now, stop: make(chan struct{}), storeURL: opts.Store}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.jwks.log = g.log
	if g.registry == nil {
		g.registry = prometheus.NewRegistry()
	}
	m, err := newMetrics(g.registry)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	g.metrics = m
	if g.refusals, err = newRefusals(g.registry); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	if g.conns, err = newConnMetrics(g.registry); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	if err := g.openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if err := g.openAccessLog(cfg); err != nil {
		g.closeFn()
		return nil, err
	}
	if err := g.openTracing(ctx, cfg); err != nil {
		g.closeFn()
		g.closeAccessLog()
		return nil, err
	}
	g.events = eventlog.New(g.log, eventlog.Options{})
	if g.ops, err = newOps(ctx, g); err != nil {
		g.closeFn()
		g.events.Close()
		g.closeAccessLog()
		g.closeTracing()
		return nil, err
	}
	st, err := g.build(cfg)
	if err != nil {
		g.ops.close()
		g.closeFn()
		g.events.Close()
		g.closeAccessLog()
		g.closeTracing()
		return nil, err
	}
	g.cur.Store(st)
	if g.mem != nil && cfg.SnapshotFile != "" {
		g.wg.Add(1)
		go g.snapshotLoop(cfg.SnapshotEvery)
	}
	return g, nil
}

func (g *Gateway) openStore(ctx context.Context, cfg *Config) error {
	// The Redis store falls back to a local memory store itself with
	// on_store_error: local; otherwise it returns errors, and the
	// middleware applies the policy (allow skips the rule, deny and error
	// answer 503, deny with Retry-After). With Redis down at start the gateway starts anyway.
	var ro redisstore.Options
	if cfg.OnStoreError == ratelimit.FailLocal {
		ro.OnError = ratelimit.FailLocal
	}
	st, err := storeurl.Open(ctx, g.StoreURL(cfg), storeurl.Options{MaxKeys: cfg.MaxKeys, Redis: ro, OnStoreError: cfg.OnStoreError, Logger: g.log})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if err := st.Register(g.registry); err != nil {
		st.Close()
		return fmt.Errorf("gateway: metrics: %w", err)
	}
	g.st, g.store, g.mem = st, st, st.Memory
	g.closeFn = st.Close
	if g.mem == nil || cfg.SnapshotFile == "" {
		return nil
	}
	g.snapFile = cfg.SnapshotFile
	f, err := os.Open(g.snapFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		st.Close()
		return fmt.Errorf("gateway: restore snapshot: %w", err)
	default:
		err = g.mem.Restore(f)
		f.Close()
		if err != nil {
			// A damaged snapshot must not keep the gateway down: start
			// empty and say so.
			g.log.Error("gateway: snapshot not restored, starting with empty state", "file", g.snapFile, "err", err)
		} else {
			g.log.Info("gateway: state restored", "file", g.snapFile, "keys", g.mem.Len())
		}
	}
	g.openJournal(cfg)
	return nil
}

// openJournal replays the memory store's journal of quota charges (the
// charges since the snapshot, lost by a crash otherwise) and keeps
// recording to it. A torn last record is the crash the journal is for:
// logged, and the whole records before it replayed. A damaged journal
// does not keep the gateway down either: its whole records before the
// damage are replayed, the file is kept aside (renamed, never
// overwritten) for the operator, and a new journal starts. Nor does a
// journal that cannot be opened (as a snapshot that cannot be written):
// the gateway logs it and serves without one. After a replay the state
// is written to a snapshot at once, which compacts the journal.
func (g *Gateway) openJournal(cfg *Config) {
	file := cfg.JournalFile()
	if file == "" {
		return
	}
	opts := memstore.JournalOptions{Interval: cfg.JournalEvery, Logger: g.log}
	rep, err := g.mem.OpenJournal(file, opts)
	var je *memstore.JournalError
	if errors.As(err, &je) {
		kept := fmt.Sprintf("%s.damaged-%d", file, time.Now().Unix())
		err = os.Rename(file, kept)
		if err == nil {
			g.log.Error("gateway: journal damaged: replayed up to the damage, kept the file aside, started a new journal",
				"file", file, "offset", je.Offset, "reason", je.Reason, "kept", kept, "replayed", rep.Records)
			_, err = g.mem.OpenJournal(file, opts)
		}
	}
	if err != nil {
		g.log.Error("gateway: journal not opened: a crash loses the quotas' charges since the last snapshot", "file", file, "err", err)
		return
	}
	if rep.Torn > 0 {
		g.log.Warn("gateway: journal's last record was cut short (a crash while writing it); replayed the whole records before it",
			"file", file, "offset", rep.TornAt, "bytes", rep.Torn)
	}
	if rep.Records > 0 || je != nil {
		g.log.Info("gateway: journal replayed", "file", file, "records", rep.Records, "skipped", rep.Skipped)
		if err := g.Snapshot(); err != nil {
			g.log.Error("gateway: snapshot after the journal's replay failed", "err", err)
		}
	}
}

// bindRules binds cfg's rules to the store once for every route and
// request (rules.Set.Bind), rules with prefetch: true to the Redis store's
// prefetch view. An error refuses the config (a reload keeps the last good
// one). On the memory store prefetch: true changes nothing, with a warning.
func (g *Gateway) bindRules(cfg *Config) (*rules.Set, error) {
	if cfg.Rules == nil {
		return nil, nil
	}
	for _, p := range cfg.Rules.Warnings() { // lease: true, prefetch's old spelling
		g.log.Warn("gateway: "+p.Msg, "at", fmt.Sprintf("%s:%d", p.File, p.Line), "path", p.Path)
	}
	var opts rules.BindOptions
	if lr := cfg.Rules.PrefetchRules(); len(lr) > 0 {
		l, err := g.st.PrefetchView()
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		if l != nil {
			opts.Prefetch = l
		} else {
			for _, r := range lr {
				g.log.Warn("gateway: prefetch: true has no effect on the memory store: the rule is decided exactly, in process", "rule", r.Key, "at", fmt.Sprintf("%s:%d", r.File, r.Line))
			}
		}
	}
	set, err := cfg.Rules.Bind(g.store, opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return set, nil
}

// Store returns the gateway's store.
func (g *Gateway) Store() ratelimit.Store { return g.store }

// Config returns the config being served.
func (g *Gateway) Config() *Config { return g.cur.Load().cfg }

// Handler returns the public handler: limits, then the upstream. It always
// serves the current config.
func (g *Gateway) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.cur.Load().handler.ServeHTTP(w, r)
	})
}

// AdminHandler returns the admin handler: /metrics (Prometheus), /healthz
// (the process is up) and /readyz (it serves traffic; 503 while draining;
// a second line says how the store is: "store redis://…: unavailable
// since …" while on_store_error answers for Redis, and a line per
// upstream how it is: "upstream api http://…: ok", or "unreachable since
// …" after the proxy's 502 or 504 until its next response),
// and /debug/pprof/ when the config at start says pprof: true.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	if g.Config().Pprof {
		admin.Register(mux)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{}))
	g.ops.registerAdmin(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if g.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		// The store line says whether the store decides for itself or
		// on_store_error answers for it (Redis down); ready either way.
		// So does a line per upstream: ok, or unreachable since when.
		_, detail := g.st.Ready()
		w.Write([]byte("ok\n" + detail + "\n" + upstreamsReady(g.cur.Load().upstreams)))
	})
	return mux
}

// Reload swaps in cfg. A config that cannot be served (its identity files
// cannot be loaded) is refused and the current one keeps serving. Settings
// that need a restart (listen addresses, store, snapshot) are logged and
// ignored. Counters are not reset: they live in the store, keyed by the
// rules' descriptors, so unchanged rules keep counting where they were.
// Every reload is logged once and counted once in
// sluice_gateway_config_reloads_total{result="ok"} or {result="invalid"}.
func (g *Gateway) Reload(cfg *Config) error {
	return g.reload(cfg.File, "", func() (*Config, error) { return cfg, nil })
}

// ReloadFile parses filename and reloads it; see Reload. A refused file,
// whatever refused it (it cannot be read, does not parse, is invalid, or
// names identity files that cannot be loaded), is logged once, with every
// problem, and counted once as invalid.
func (g *Gateway) ReloadFile(filename string) error {
	return g.reload(filename, "", func() (*Config, error) { return ParseFile(filename) })
}

// Resolver builds the identity resolver that cfg describes, loading its
// key files. sluice check uses it to validate a config offline.
func Resolver(cfg *Config) (*identity.Resolver, error) { return newResolver(cfg, newJWKS) }

// newResolver is Resolver with the JWKS of jwks_url from jwks.
func newResolver(cfg *Config, jwks func(*JWTConfig) (*identity.JWKS, error)) (*identity.Resolver, error) {
	ic := cfg.Identity
	opts := identity.Options{TrustedProxies: ic.TrustedProxies, IPv6Prefix: ic.IPv6Prefix, UserHeader: ic.UserHeader, TierHeader: ic.TierHeader}
	if ic.APIKeysFile != "" {
		data, err := cfg.read(ic.APIKeysFile)
		var ks *identity.KeyStore
		if err == nil {
			ks, err = identity.ParseKeyFile(ic.APIKeysFile, data)
		}
		if err != nil {
			return nil, fmt.Errorf("gateway: %s: identity.api_keys_file: %w", cfg.File, err)
		}
		opts.APIKeys = ks
	}
	if ic.JWT != nil {
		j, err := jwtConfig(cfg, ic.JWT, jwks)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s: identity.jwt: %w", cfg.File, err)
		}
		opts.JWT = j
	}
	r, err := identity.NewResolver(opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: %s: identity: %w", cfg.File, err)
	}
	return r, nil
}

// Check validates a config offline: it parses it and loads the files it
// names, without opening the store or listening.
func Check(filename string, data []byte) error {
	cfg, err := Parse(filename, data)
	if err != nil {
		return err
	}
	_, err = Resolver(cfg)
	return err
}

// routeHandler serves one route: it resolves the caller (see
// forward.go), strips the identity headers an untrusted peer may not
// set, and hands the request to the route's limits and the upstream.
type routeHandler struct {
	limited  http.Handler
	resolver *identity.Resolver
	headers  *identityHeaders
	write    time.Duration // the response's write deadline: upstream_timeout + write_timeout
	log      *slog.Logger
	refuse   func(http.ResponseWriter, *http.Request, error) // a refused credential: Gateway.refuse
	tracer   *tracing.Tracer                                 // nil: no spans
}

func (h *routeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.tracer != nil {
		// The request's span, the child of the caller's; its context
		// goes on to the upstream (proxy) and its decisions come from
		// the rate limits' observer (traceObserver).
		var sp *tracing.Span
		r, sp = h.tracer.StartRequest(r)
		defer sp.End()
	}
	setWriteDeadline(w, h.write)
	id, err := h.resolver.Resolve(r)
	if err != nil {
		if errors.Is(err, identity.ErrUnauthorized) {
			h.refuse(w, r, err)
			return
		}
		h.log.Error("gateway: identify caller", "err", err)
		problem(w, http.StatusInternalServerError, "cannot identify the caller")
		return
	}
	r = h.headers.stripUntrusted(r)
	ctx := withIdentity(r.Context(), id)
	ctx.method, ctx.path = r.Method, r.URL.Path
	h.limited.ServeHTTP(w, r.WithContext(ctx))
}

// upstream is the handler requests to l go to once admitted: the
// built-in echo API, or a reverse proxy over l's Transport.
func (g *Gateway) upstream(l *upstreamLink, cfg *Config, ih *identityHeaders) http.Handler {
	if l.echo {
		return http.HandlerFunc(echo)
	}
	return g.proxy(l, cfg.Identity.TrustedProxies, ih)
}

// ruleNames are the names of every rule of cfg, in every domain.
func ruleNames(cfg *Config) []string {
	var names []string
	if cfg.Rules != nil {
		for _, dom := range cfg.Rules.Domains() {
			for _, r := range cfg.Rules.Config(dom).Rules() {
				names = append(names, r.Name)
			}
		}
	}
	return names
}

func (g *Gateway) build(cfg *Config) (*state, error) {
	resolver, err := newResolver(cfg, g.jwks.get)
	if err != nil {
		return nil, err
	}
	// The middleware takes the identity routeHandler resolved.
	res := cachedIdentity{resolver}
	ih := newIdentityHeaders(cfg.Identity)
	cc := cfg.Connections.withDefaults(DefaultConnections())
	links, upstreams, err := g.routeUpstreams(cfg, ih) // upstreams.go
	if err != nil {
		return nil, err
	}
	observe, refusals := g.observers(cfg) // refusals.go
	set, err := g.bindRules(cfg)
	if err != nil {
		return nil, err
	}
	layers, err := g.concurrencyFor(cfg, res, refusals) // in_flight, shedding, adaptive (concurrency.go)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	dmux, answer := decisionMux(cfg, ih) // decision.go; nil without decision
	patterns := routePatterns(cfg.Routes)
	catchAll := false
	var sole http.Handler // the last route's handler (soleRoute: the only one)
	for i, rc := range cfg.Routes {
		mw := &httplimit.Middleware{
			Store:         g.store,
			Rules:         set,
			Domain:        cfg.Domain,
			Descriptors:   rc.Descriptors,
			Identity:      res,
			Cost:          rc.Cost,
			CostHeader:    rc.CostHeader,
			Headers:       cfg.Headers,
			Shadow:        cfg.Shadow,
			Disabled:      cfg.Disabled,
			DisabledRules: cfg.DisabledRules,
			OnStoreError:  cfg.OnStoreError,
			ResetJitter:   cfg.ResetJitter,
			RefundOn:      refundHook(rc.RefundOn, rc.RefundOnGateway),
			RefundBudget:  rc.RefundBudget,
			Observe:       observe,
			Refusals:      refusals,
			Denial:        rc.Denial,
			Adjust:        g.ops.adjuster(cfg),
			Logger:        g.log,
		}
		rt := &routeHandler{limited: layers.wrap(i, mw.Handler, upstreams[i]), resolver: resolver, headers: ih,
			write: rc.UpstreamTimeout + cc.WriteTimeout, log: g.log, refuse: g.refuse, tracer: g.tracer}
		sole = rt
		for _, p := range patterns[i] {
			if err := register(mux, p, rt); err != nil {
				return nil, fmt.Errorf("gateway: %s: routes[%d]: %w", cfg.File, i, err)
			}
			catchAll = catchAll || p == "/"
		}
		if dmux != nil { // the same route, deciding
			addDecisionRoute(dmux, rt, layers.wrap(i, mw.Handler, answer), patterns[i])
		}
	}
	if err := g.ops.configure(cfg, mux, res); err != nil {
		return nil, err
	}
	var routes http.Handler = mux
	if soleRoute(cfg, patterns) {
		routes = sole
	}
	return &state{cfg: cfg, handler: g.publicHandler(cfg, cc, mux, routes, dmux, catchAll), upstreams: links}, nil
}

// soleRoute reports whether cfg's route table is one route matching every
// request (the path "/", any method, any host) and nothing else is
// served on the public listener (no rate_limit_endpoint, the one pattern
// ops.configure adds): then every request canonicalize lets through goes
// to that route, and publicHandler calls it without the mux's match
// (which finds the pattern, then looks the path up again with a "/"
// added, for a redirect it never makes here: three allocations a
// request). A request the mux would answer itself is refused before it:
// "*" is not a path, and a path not clean is redirected.
func soleRoute(cfg *Config, patterns [][]string) bool {
	return len(patterns) == 1 && len(patterns[0]) == 1 && patterns[0][0] == "/" && cfg.RateLimitEndpoint == ""
}

// publicHandler is the public listener's handler over the route table
// routes (the mux, or its sole route when soleRoute; catchAll: a route
// matches every path), and dmux when the listener decides (decision.go).
func (g *Gateway) publicHandler(cfg *Config, cc ConnConfig, mux *http.ServeMux, routes http.Handler, dmux *http.ServeMux, catchAll bool) http.Handler {
	if !catchAll {
		mux.HandleFunc("/", noRoute)
	}
	// The body's deadline here; the response's in routeHandler, which
	// knows the route's upstream_timeout (the gateway's own answers are
	// a few hundred bytes).
	return withDeadlines(g.decisions(cfg, dmux, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if canonicalize(w, r) {
			routes.ServeHTTP(w, r)
		}
	})), cc.ReadTimeout, 0)
}

// noRoute answers a request that no route matches.
func noRoute(w http.ResponseWriter, r *http.Request) {
	problem(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// withTimeout bounds the upstream call (the whole exchange, body
// included) by d. It does not buffer or wrap the ResponseWriter.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// proxy returns a reverse proxy to target. Forwarding headers from the
// client are dropped (ReverseProxy does so before Rewrite) and set afresh
// from the peer; only when the peer is a trusted proxy is its
// X-Forwarded-For kept, with the peer appended.
//
// The identity headers are the gateway's (see identityHeaders): the
// client's own values are removed and the resolved identity set.
//
// Each upstream has a Transport of its own (upstreamTransport); a
// response from the upstream marks it healthy, a 502 or 504 of the
// proxy's unreachable (upstreams.go).
func (g *Gateway) proxy(l *upstreamLink, trusted []netip.Prefix, ih *identityHeaders) http.Handler {
	target := l.target
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 && peerTrusted(pr.In.RemoteAddr, trusted) {
				pr.Out.Header["X-Forwarded-For"] = xff
			}
			pr.SetXForwarded()
			ih.forward(pr)
			if g.tracer != nil {
				tracing.Inject(pr.In.Context(), pr.Out.Header)
			}
		},
		ModifyResponse: l.modifyResponse,
		Transport:      l.tr,
		BufferPool:     proxyBuffers{},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status, failure := http.StatusBadGateway, UpstreamUnreachable
			if errors.Is(err, context.DeadlineExceeded) {
				status, failure = http.StatusGatewayTimeout, UpstreamTimeout
			}
			if r.Context().Err() != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				return // the client went away
			}
			markFailure(r.Context(), failure) // for refund_on: the gateway's own answer, not the upstream's
			l.health.fail(time.Now(), err)
			// Counted per upstream, one line an interval: an
			// upstream outage must not become a logging outage.
			g.events.Report(eventlog.UpstreamError, target.Host, r.URL.Path, err)
			httplimit.WriteProblem(w, httplimit.Problem{Status: status, Detail: "the upstream did not answer"})
		},
	}
}

func peerTrusted(remoteAddr string, trusted []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Serve serves the public handler on ln and the admin handler on admin
// (when not nil) until ctx is done, then shuts down gracefully: /readyz
// turns 503, listeners close, and in-flight requests get up to the
// config's shutdown_timeout to finish. It returns nil after a clean
// shutdown.
//
// Each listener is bounded by the config's connections and
// admin_connections (see ConnConfig): at most max connections open,
// idle keep-alive connections closed after idle_timeout (and first when
// room is needed), headers within read_header_timeout of a request's
// start, bodies within read_timeout of the headers, responses within
// write_timeout (plus the route's upstream_timeout). Those of the config
// at the start of Serve hold until it returns, except read_timeout and
// write_timeout of the public listener, which follow reloads.
func (g *Gateway) Serve(ctx context.Context, ln, admin net.Listener) error {
	cfg := g.Config()
	pc := cfg.Connections.withDefaults(DefaultConnections())
	plim := newConnLimiter(pc.Max, g.conns, "public")
	pub := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: pc.ReadHeaderTimeout, IdleTimeout: pc.IdleTimeout,
		MaxHeaderBytes: pc.MaxHeaderBytes, ConnState: plim.connState, ErrorLog: g.events.ErrorLog("listen")}
	cfg.HTTP2.protocols(pub, cfg.TLS != nil)
	if pp := cfg.ProxyProtocol; pp != nil {
		ln = &proxyListener{Listener: ln, cfg: pp, timeout: pc.ReadHeaderTimeout,
			refused: g.conns.proxy.WithLabelValues("untrusted"), invalid: g.conns.proxy.WithLabelValues("invalid")}
	}
	var adm *http.Server
	errc := make(chan error, 2)
	go func() {
		if cfg.TLS != nil {
			errc <- g.serveTLS(pub, plim.listener(ln), cfg.TLS, !cfg.HTTP2.Off)
			return
		}
		errc <- pub.Serve(plim.listener(ln))
	}()
	n := 1
	if admin != nil {
		ac := cfg.AdminConnections.withDefaults(DefaultAdminConnections())
		alim := newConnLimiter(ac.Max, g.conns, "admin")
		adm = &http.Server{Handler: withDeadlines(g.AdminHandler(), ac.ReadTimeout, ac.WriteTimeout),
			ReadHeaderTimeout: ac.ReadHeaderTimeout, IdleTimeout: ac.IdleTimeout, MaxHeaderBytes: ac.MaxHeaderBytes,
			ConnState: alim.connState, ErrorLog: g.events.ErrorLog("admin_listen")}
		go func() { errc <- adm.Serve(alim.listener(admin)) }()
		n++
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		n--
	}
	g.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Config().ShutdownTimeout)
	defer cancel()
	if e := pub.Shutdown(sctx); e != nil && err == nil {
		err = fmt.Errorf("gateway: drain: %w", e)
	}
	if adm != nil {
		adm.Shutdown(sctx)
	}
	for ; n > 0; n-- {
		if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = e
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close stops the snapshot loop, writes a last snapshot (memory store with
// snapshot.file) and closes the store. It is idempotent.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		close(g.stop)
		g.wg.Wait()
		var errs []error
		if g.mem != nil && g.snapFile != "" {
			errs = append(errs, g.Snapshot())
		}
		g.ops.close()
		errs = append(errs, g.closeFn(), g.events.Close(), g.closeAccessLog(), g.closeTracing())
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

// Snapshot writes the memory store's state to the snapshot file (through
// a temporary file and a rename, so a crash never leaves half a
// snapshot) and compacts its journal (memstore.Store.SaveSnapshot). It
// does nothing for other stores.
func (g *Gateway) Snapshot() error {
	if g.mem == nil || g.snapFile == "" {
		return nil
	}
	if err := g.mem.SaveSnapshot(g.snapFile); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

func (g *Gateway) snapshotLoop(every time.Duration) {
	defer g.wg.Done()
	tick.Loop(g.stop, every, func(time.Time) {
		if err := g.Snapshot(); err != nil {
			g.log.Error("gateway: periodic snapshot failed", "err", err)
		}
	})
}
