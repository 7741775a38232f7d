package gateway

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/internal/server/eventlog"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/storeurl"
)

// Concurrency limits and load shedding: the in_flight, shedding and
// adaptive sections of the config, and what the gateway builds of them
// (Stripe's layers 2 to 4, and adaptive concurrency).
//
// A route's request passes, in order: the shedders (shedding: this
// process's utilization, then the fleet's cap), the rate limits
// (rate_limits), the caller's in-flight cap (in_flight), the route's
// adaptive concurrency limit (adaptive), and then goes upstream. A shed
// request costs no rate limit token and holds no lease.

// InFlightConfig is an in_flight section (top level: every route's
// default; on a route: that route's): how many requests one caller (the
// identity the rate limits use) may have in flight at once.
type InFlightConfig struct {
	Max        int64         // max: the cap per caller (GitHub's is 100); 0 on a route turns the top level's off
	TTL        time.Duration // ttl: a lease's lifetime unless renewed (renewed every ttl/2 while the request runs); default 30s
	RetryAfter time.Duration // retry_after: the Retry-After of its 429; default 1s
}

// SheddingConfig is the shedding section: priority classes and the two
// load shedders. At least one of Utilization and Fleet is set.
type SheddingConfig struct {
	// Classes (classes) is the shedding order, the first shed first;
	// default test, get, post, critical.
	Classes []string
	// PriorityHeader (priority_header) names a request header carrying a
	// class name, believed only from identity.trusted_proxies.
	PriorityHeader string
	// Tiers (tiers) maps a caller's tier to a class (test-mode keys to
	// test, say).
	Tiers map[string]string
	// Methods (methods) maps a method to a class. Default, when the
	// classes include get and post: GET, HEAD and OPTIONS are get, every
	// other method post.
	Methods map[string]string
	// DefaultClass (default_class) is the class of a request nothing else
	// classifies; default post when it is a class, else the last class.
	DefaultClass string
	// RetryAfter (retry_after) is the Retry-After of a shed request's
	// 503; default 1s.
	RetryAfter  time.Duration
	Utilization *UtilizationConfig // utilization: this process's shedder
	Fleet       *FleetConfig       // fleet: the fleet's shedder

	classes shed.Classes
	line    int
	hdrLine int
}

// UtilizationConfig is shedding.utilization (shed.UtilizationOptions).
type UtilizationConfig struct {
	Capacity  int64         // capacity: requests this process works on at once when fully used (required)
	Threshold float64       // threshold: shedding starts above this utilization; default 0.8
	Full      float64       // full: the utilization at which every class is shed; default 1
	Ramp      time.Duration // ramp: how slowly the amount follows its target; default 120s
	Interval  time.Duration // interval: how often the amount moves; default 1s
}

// FleetConfig is shedding.fleet (shed.FleetOptions): one cap on the
// requests in flight across every gateway sharing the store.
type FleetConfig struct {
	Cap          int64         // cap: the most requests in flight across the fleet (required)
	Reserved     float64       // reserved: the share of cap kept for critical classes; default 0.2 (Stripe's)
	CriticalFrom string        // critical_from: the first critical class (it and those after it); default the last class
	TTL          time.Duration // ttl: a lease's lifetime unless renewed; default 30s
	Key          string        // key: the shared in-flight key; default sluice:fleet
}

// AdaptiveConfig is a route's adaptive section: a concurrency limit for
// the route's upstream that follows its latency (adaptive.Gradient or
// adaptive.Vegas), answering 503 over the limit.
type AdaptiveConfig struct {
	Algorithm string        // algorithm: gradient (default) or vegas
	Initial   int           // initial: the starting limit; default 20
	Min       int           // min: the floor; default 1
	Max       int           // max: the ceiling; default 1000
	Window    time.Duration // window: the sampling window; default 100ms
	Tolerance float64       // tolerance (gradient): the latency rise taken as queueing; default 1.1 (adaptive.GradientOptions)
}

// inFlight decodes an in_flight section.
func (d *decoder) inFlight(n *yaml.Node, path string, route bool) *InFlightConfig {
	c := &InFlightConfig{}
	seen := false
	lo := int64(1)
	if route {
		lo = 0
	}
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"max": func(k, v *yaml.Node) {
			seen = true
			c.Max = d.integer(v, yamlnode.Join(path, "max"), lo, 1<<30)
		},
		"ttl": func(k, v *yaml.Node) {
			c.TTL = d.boundedDuration(v, yamlnode.Join(path, "ttl"), time.Millisecond, inflight.MaxTTL)
		},
		"retry_after": func(k, v *yaml.Node) {
			c.RetryAfter = d.boundedDuration(v, yamlnode.Join(path, "retry_after"), time.Second, time.Hour)
		},
	})
	if !seen {
		d.add(n.Line, yamlnode.Join(path, "max"), "missing max (the requests one caller may have in flight; GitHub allows 100)")
	}
	return c
}

// boundedDuration reads a duration in [lo, hi].
func (d *decoder) boundedDuration(n *yaml.Node, path string, lo, hi time.Duration) time.Duration {
	v := d.duration(n, path)
	if v != 0 && (v < lo || v > hi) {
		d.add(n.Line, path, "want a duration from %v to %v, got %v", lo, hi, v)
		return 0
	}
	return v
}

// number reads a number in (lo, hi] (in [lo, hi] when closed).
func (d *decoder) number(n *yaml.Node, path string, lo, hi float64, closed bool) float64 {
	f, err := strconv.ParseFloat(d.str(n, path), 64)
	ok := err == nil && n.Kind == yaml.ScalarNode && (n.Tag == "!!float" || n.Tag == "!!int") && f <= hi && !math.IsNaN(f)
	if ok && closed {
		ok = f >= lo
	} else if ok {
		ok = f > lo
	}
	if !ok {
		open := "above"
		if closed {
			open = "from"
		}
		d.add(n.Line, path, "want a number %s %v to %v, got %s", open, lo, hi, yamlnode.Kind(n))
		return 0
	}
	return f
}

// classMap reads a mapping of names to class names.
func (d *decoder) classMap(n *yaml.Node, path string, key func(k *yaml.Node, p string) string) map[string]string {
	n = d.deref(n)
	if n == nil || yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, path, "want a mapping of names to class names, got %s", yamlnode.Kind(n))
		return nil
	}
	m := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], d.deref(n.Content[i+1])
		if v == nil {
			return m
		}
		name := key(k, path)
		p := yamlnode.Join(path, k.Value)
		if _, dup := m[name]; dup {
			d.add(k.Line, p, "named twice")
			continue
		}
		m[name] = d.str(v, p)
	}
	return m
}

// shedding decodes the shedding section.
func (d *decoder) shedding(n *yaml.Node) *SheddingConfig {
	const path = "shedding"
	s := &SheddingConfig{line: n.Line}
	var classesLine int
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"classes": func(k, v *yaml.Node) {
			classesLine = v.Line
			d.list(v, "shedding.classes", func(_ int, v *yaml.Node, p string) { s.Classes = append(s.Classes, d.str(v, p)) })
		},
		"priority_header": func(k, v *yaml.Node) {
			s.PriorityHeader, s.hdrLine = d.header(v, "shedding.priority_header"), v.Line
		},
		"tiers": func(k, v *yaml.Node) {
			s.Tiers = d.classMap(v, "shedding.tiers", func(k *yaml.Node, p string) string { return d.str(k, p) })
		},
		"methods": func(k, v *yaml.Node) {
			s.Methods = d.classMap(v, "shedding.methods", func(k *yaml.Node, p string) string {
				m := strings.ToUpper(d.str(k, p))
				if !methods[m] {
					d.add(k.Line, p, "unknown HTTP method %s", yamlnode.Kind(k))
				}
				return m
			})
		},
		"default_class": func(k, v *yaml.Node) { s.DefaultClass = d.str(v, "shedding.default_class") },
		"retry_after": func(k, v *yaml.Node) {
			s.RetryAfter = d.boundedDuration(v, "shedding.retry_after", time.Second, time.Hour)
		},
		"utilization": func(k, v *yaml.Node) { s.Utilization = d.utilization(v) },
		"fleet":       func(k, v *yaml.Node) { s.Fleet = d.fleet(v) },
	})
	if !d.checkClasses(s, n, classesLine) {
		return s
	}
	if s.Utilization == nil && s.Fleet == nil {
		d.add(n.Line, path, "shedding sheds nothing without utilization or fleet")
	}
	return s
}

// utilization decodes shedding.utilization.
func (d *decoder) utilization(v *yaml.Node) *UtilizationConfig {
	const p = "shedding.utilization"
	u := &UtilizationConfig{}
	seen := false
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"capacity":  func(k, v *yaml.Node) { seen = true; u.Capacity = d.integer(v, p+".capacity", 1, 1<<24) },
		"threshold": func(k, v *yaml.Node) { u.Threshold = d.number(v, p+".threshold", 0, 10, false) },
		"full":      func(k, v *yaml.Node) { u.Full = d.number(v, p+".full", 0, 10, false) },
		"ramp":      func(k, v *yaml.Node) { u.Ramp = d.boundedDuration(v, p+".ramp", time.Millisecond, 24*time.Hour) },
		"interval": func(k, v *yaml.Node) {
			u.Interval = d.boundedDuration(v, p+".interval", time.Millisecond, time.Hour)
		},
	})
	if !seen {
		d.add(v.Line, p+".capacity", "missing capacity (the requests this process works on at once when fully used)")
	}
	th, full := u.Threshold, u.Full
	if th == 0 {
		th = shed.DefaultThreshold
	}
	if full == 0 {
		full = 1
	}
	if full <= th {
		d.add(lineIn(v, "full"), p+".full", "full utilization %v must be above the threshold %v", full, th)
	}
	return u
}

// fleet decodes shedding.fleet.
func (d *decoder) fleet(v *yaml.Node) *FleetConfig {
	const p = "shedding.fleet"
	f := &FleetConfig{Reserved: 0.2}
	seen := false
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"cap":           func(k, v *yaml.Node) { seen = true; f.Cap = d.integer(v, p+".cap", 1, inflight.MaxCap) },
		"reserved":      func(k, v *yaml.Node) { f.Reserved = d.number(v, p+".reserved", 0, 0.99, true) },
		"critical_from": func(k, v *yaml.Node) { f.CriticalFrom = d.str(v, p+".critical_from") },
		"ttl": func(k, v *yaml.Node) {
			f.TTL = d.boundedDuration(v, p+".ttl", time.Millisecond, inflight.MaxTTL)
		},
		"key": func(k, v *yaml.Node) {
			f.Key = d.str(v, p+".key")
			if f.Key == "" || strings.ContainsAny(f.Key, "{}") {
				d.add(v.Line, p+".key", "want a non-empty key without { or }, got %q", f.Key)
			}
		},
	})
	if !seen {
		d.add(v.Line, p+".cap", "missing cap (the most requests in flight across the fleet)")
	}
	return f
}

// checkClasses builds the shedding classes and checks that every class
// the section names is one of them, filling in the default methods and
// class. It reports false when the classes themselves are refused.
func (d *decoder) checkClasses(s *SheddingConfig, n *yaml.Node, classesLine int) bool {
	cs, err := shed.NewClasses(s.Classes...)
	if err != nil {
		d.add(max(classesLine, n.Line), "shedding.classes", "%s", strings.TrimPrefix(err.Error(), shed.ErrClasses.Error()+": "))
		return false
	}
	s.classes = cs
	s.Classes = cs.Names()
	known := func(name string, line int, p string) {
		if _, ok := cs.Lookup(name); !ok {
			d.add(line, p, "no class %q (classes: %s)", name, strings.Join(s.Classes, ", "))
		}
	}
	for t, c := range s.Tiers {
		known(c, lineIn(n, "tiers."+t), "shedding.tiers."+t)
	}
	if s.Methods == nil {
		s.Methods = defaultClassMethods(cs)
	}
	for m, c := range s.Methods {
		known(c, lineIn(n, "methods."+m), "shedding.methods."+m)
	}
	if s.DefaultClass == "" {
		s.DefaultClass = cs.Name(cs.Last())
		if _, ok := cs.Lookup("post"); ok {
			s.DefaultClass = "post"
		}
	} else {
		known(s.DefaultClass, lineIn(n, "default_class"), "shedding.default_class")
	}
	if s.Fleet != nil && s.Fleet.CriticalFrom != "" {
		known(s.Fleet.CriticalFrom, lineIn(n, "fleet.critical_from"), "shedding.fleet.critical_from")
	}
	return true
}

// defaultClassMethods sorts methods into the classes get (safe methods)
// and post (the rest) when both exist; else nil.
func defaultClassMethods(cs shed.Classes) map[string]string {
	_, g := cs.Lookup("get")
	_, p := cs.Lookup("post")
	if !g || !p {
		return nil
	}
	m := map[string]string{}
	for method := range methods {
		m[method] = "post"
	}
	m["GET"], m["HEAD"], m["OPTIONS"] = "get", "get", "get"
	return m
}

// adaptive decodes a route's adaptive section.
func (d *decoder) adaptive(n *yaml.Node, path string) *AdaptiveConfig {
	a := &AdaptiveConfig{Algorithm: "gradient"}
	p := func(f string) string { return yamlnode.Join(path, f) }
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"algorithm": func(k, v *yaml.Node) {
			a.Algorithm = d.str(v, p("algorithm"))
			if a.Algorithm != "gradient" && a.Algorithm != "vegas" {
				d.add(v.Line, p("algorithm"), "want gradient or vegas, got %s", yamlnode.Kind(v))
			}
		},
		"initial":   func(k, v *yaml.Node) { a.Initial = int(d.integer(v, p("initial"), 1, 1<<20)) },
		"min":       func(k, v *yaml.Node) { a.Min = int(d.integer(v, p("min"), 1, 1<<20)) },
		"max":       func(k, v *yaml.Node) { a.Max = int(d.integer(v, p("max"), 1, 1<<20)) },
		"window":    func(k, v *yaml.Node) { a.Window = d.boundedDuration(v, p("window"), time.Millisecond, time.Minute) },
		"tolerance": func(k, v *yaml.Node) { a.Tolerance = d.number(v, p("tolerance"), 1, 100, false) },
	})
	lo, init, hi := max(a.Min, 1), a.Initial, a.Max
	if init == 0 {
		init = max(min(20, max(hi, 20)), lo)
	}
	if hi == 0 {
		hi = 1000
	}
	if lo > hi || init < lo || init > hi {
		d.add(n.Line, path, "want min ≤ initial ≤ max, got %d, %d, %d", lo, init, hi)
	}
	if a.Tolerance != 0 && a.Algorithm != "gradient" {
		d.add(lineIn(n, "tolerance"), p("tolerance"), "tolerance is the gradient algorithm's")
	}
	return a
}

// checkConcurrency checks what spans sections: a route's priority names
// a class of shedding, and a priority header comes from trusted proxies.
func (d *decoder) checkConcurrency(c *Config, lines []int) {
	s := c.Shedding
	if s != nil && s.PriorityHeader != "" && len(c.Identity.TrustedProxies) == 0 {
		d.add(s.hdrLine, "shedding.priority_header", "the priority header is believed only from identity.trusted_proxies, and there are none")
	}
	if s != nil && s.PriorityHeader != "" && !slices.Contains(c.Identity.StripHeaders, s.PriorityHeader) {
		// Like the user and tier headers: removed from what an untrusted
		// peer sends, so the upstream cannot be told a priority either.
		c.Identity.StripHeaders = append(c.Identity.StripHeaders, s.PriorityHeader)
	}
	for i, r := range c.Routes {
		if r.Priority == "" {
			continue
		}
		path := fmt.Sprintf("routes[%d].priority", i)
		line := r.priorityLine
		if line == 0 && i < len(lines) {
			line = lines[i]
		}
		switch {
		case s == nil:
			d.add(line, path, "a route priority needs a shedding section")
		case s.classes.Len() > 0:
			if _, ok := s.classes.Lookup(r.Priority); !ok {
				d.add(line, path, "no class %q (classes: %s)", r.Priority, strings.Join(s.Classes, ", "))
			}
		}
	}
}

// concurrency is what the gateway keeps of the concurrency sections across
// reloads: the utilization shedder and the adaptive limiters (kept while their
// options are unchanged, so a reload does not forget what is in flight or
// what was learnt), and the metrics. The in-flight store is the rate limit
// store's (storeurl.Store.InFlight), opened once and closed with it.
type concurrency struct {
	g *Gateway

	mu       sync.Mutex
	util     *shed.Utilization
	utilOpts UtilizationConfig
	utilCls  string
	limiters map[string]routeLimiter // by route and options

	inFlight  *prometheus.CounterVec
	shedVec   *prometheus.CounterVec
	utilGauge prometheus.Collector
}

// concurrencyState returns the gateway's concurrency state, creating it
// (and registering its metrics) the first time.
func (g *Gateway) concurrencyState() (*concurrency, error) {
	if g.conc != nil {
		return g.conc, nil
	}
	c := &concurrency{g: g, limiters: map[string]routeLimiter{}}
	c.inFlight = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "gateway", Name: "in_flight_decisions_total",
		Help: "Per-caller in-flight limit decisions (in_flight) by outcome (allowed, denied, store_error).",
	}, []string{"outcome"})
	c.shedVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "gateway", Name: "shed_decisions_total",
		Help: "Load shedder decisions by shedder (utilization, fleet), priority class and outcome (allowed, denied, store_error).",
	}, []string{"shedder", "class", "outcome"})
	stat := func(f func(shed.UtilizationStats) float64) func() float64 {
		return func() float64 {
			c.mu.Lock()
			u := c.util
			c.mu.Unlock()
			if u == nil {
				return 0
			}
			return f(u.Stats())
		}
	}
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "gateway", Name: "utilization",
			Help: "The utilization shedder's mean utilization (in-flight / capacity) at its last update."},
			stat(func(s shed.UtilizationStats) float64 { return s.Utilization })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "gateway", Name: "shed_amount",
			Help: "The amount the utilization shedder sheds, 0 to 1 over the class order."},
			stat(func(s shed.UtilizationStats) float64 { return s.Amount })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "gateway", Name: "utilization_in_flight",
			Help: "Requests in flight through the utilization shedder."},
			stat(func(s shed.UtilizationStats) float64 { return float64(s.InFlight) })),
	}
	gauges = append(gauges, adaptiveCollector{c})
	for _, col := range append([]prometheus.Collector{c.inFlight, c.shedVec}, gauges...) {
		if err := g.registry.Register(col); err != nil {
			return nil, fmt.Errorf("gateway: metrics: %w", err)
		}
	}
	g.conc = c
	return c, nil
}

// inflightStore returns the in-flight store beside cfg's store
// (storeurl.Store.InFlight: memory, or Redis on the rate limit store's
// client), for the in-flight caps and the fleet shedder.
func (c *concurrency) inflightStore(cfg *Config) inflight.Store {
	// The stores return their failures and the layers' on_store_error
	// answers them, as for the rate limits (a deny is then "limiter
	// unavailable", not "too many in flight"); only local is the store's
	// own, a memory fallback.
	var onError ratelimit.FailurePolicy
	if cfg.OnStoreError == ratelimit.FailLocal {
		onError = ratelimit.FailLocal
	}
	return c.g.st.InFlight(storeurl.InFlightOptions{OnError: onError, MaxKeys: cfg.MaxKeys, Timeout: 250 * time.Millisecond,
		OnFailure: func(err error) { c.g.events.Report(eventlog.StoreError, "in-flight", "", err) }})
}

// utilization returns the utilization shedder for u and classes, the one
// already running when they are unchanged.
func (c *concurrency) utilization(u UtilizationConfig, classes shed.Classes) (*shed.Utilization, error) {
	key := strings.Join(classes.Names(), ",")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.util != nil && c.utilOpts == u && c.utilCls == key {
		return c.util, nil
	}
	s, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: u.Capacity, Threshold: u.Threshold, Full: u.Full,
		Ramp: u.Ramp, Interval: u.Interval, Classes: classes, Now: c.g.now})
	if err != nil {
		return nil, err
	}
	c.util, c.utilOpts, c.utilCls = s, u, key
	return s, nil
}

// routeLimiter is a route's adaptive limiter and the route's label.
type routeLimiter struct {
	route string
	l     adaptive.Limiter
}

func limiterKey(route string, a AdaptiveConfig) string { return fmt.Sprintf("%s|%+v", route, a) }

// limiter returns route's adaptive limiter for a, the one already running
// when route and a are unchanged.
func (c *concurrency) limiter(route string, a AdaptiveConfig) adaptive.Limiter {
	key := limiterKey(route, a)
	c.mu.Lock()
	defer c.mu.Unlock()
	if rl, ok := c.limiters[key]; ok {
		return rl.l
	}
	lo := adaptive.LimiterOptions{Initial: a.Initial, Min: a.Min, Max: a.Max, Window: a.Window}
	var l adaptive.Limiter
	if a.Algorithm == "vegas" {
		l = adaptive.NewVegas(adaptive.VegasOptions{LimiterOptions: lo})
	} else {
		l = adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: lo, Tolerance: a.Tolerance})
	}
	c.limiters[key] = routeLimiter{route: route, l: l}
	return l
}

// keepLimiters forgets the adaptive limiters cfg does not use (a reload
// that dropped or changed a route's adaptive section), so that neither
// the map nor the metrics grow with reloads.
func (c *concurrency) keepLimiters(cfg *Config) {
	keep := map[string]bool{}
	for i, r := range cfg.Routes {
		if r.Adaptive != nil {
			keep[limiterKey(adaptiveRoute(i, r), *r.Adaptive)] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.limiters {
		if !keep[k] {
			delete(c.limiters, k)
		}
	}
}

func adaptiveRoute(i int, r Route) string {
	return fmt.Sprintf("routes[%d] %s", i, strings.TrimSpace(routeName(r)))
}

// adaptiveCollector reports each route's adaptive limit and in-flight
// count (one series per route with an adaptive section).
type adaptiveCollector struct{ c *concurrency }

var (
	adaptiveLimitDesc = prometheus.NewDesc("sluice_gateway_adaptive_limit",
		"The adaptive concurrency limit of a route (routes[].adaptive).", []string{"route"}, nil)
	adaptiveInFlightDesc = prometheus.NewDesc("sluice_gateway_adaptive_in_flight",
		"Requests in flight through a route's adaptive limit.", []string{"route"}, nil)
)

func (a adaptiveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- adaptiveLimitDesc
	ch <- adaptiveInFlightDesc
}

func (a adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	for _, rl := range a.c.limiters {
		ch <- prometheus.MustNewConstMetric(adaptiveLimitDesc, prometheus.GaugeValue, float64(rl.l.Limit()), rl.route)
		ch <- prometheus.MustNewConstMetric(adaptiveInFlightDesc, prometheus.GaugeValue, float64(rl.l.InFlight()), rl.route)
	}
}

// routeLayers builds, for one config, each route's shedders, in-flight
// cap and adaptive limit around the rate limits.
type routeLayers struct {
	c        *concurrency
	cfg      *Config
	identity httplimit.Identifier
	refusals *httplimit.Refusals // every layer's, the rate limits' too
	util     *shed.Utilization
	fleet    *shed.Fleet
	priority httplimit.Priority
}

// concurrencyFor prepares cfg's layers.
func (g *Gateway) concurrencyFor(cfg *Config, id httplimit.Identifier, refusals *httplimit.Refusals) (*routeLayers, error) {
	rl := &routeLayers{cfg: cfg, identity: id, refusals: refusals}
	needStore := cfg.InFlight != nil && cfg.InFlight.Max > 0
	for _, r := range cfg.Routes {
		needStore = needStore || (r.InFlight != nil && r.InFlight.Max > 0)
	}
	s := cfg.Shedding
	if !needStore && s == nil && !anyAdaptive(cfg) {
		return rl, nil
	}
	c, err := g.concurrencyState()
	if err != nil {
		return nil, err
	}
	rl.c = c
	c.keepLimiters(cfg)
	if s == nil {
		return rl, nil
	}
	cs := s.classes
	if cs.Len() == 0 {
		if cs, err = shed.NewClasses(s.Classes...); err != nil {
			return nil, fmt.Errorf("gateway: %s: shedding: %w", cfg.File, err)
		}
	}
	lookup := func(name string) shed.Class { cl, _ := cs.Lookup(name); return cl }
	rl.priority = httplimit.Priority{Classes: cs, Header: s.PriorityHeader, Default: lookup(s.DefaultClass)}
	if len(s.Tiers) > 0 {
		rl.priority.Tiers = map[string]shed.Class{}
		for t, n := range s.Tiers {
			rl.priority.Tiers[t] = lookup(n)
		}
	}
	if len(s.Methods) > 0 {
		rl.priority.Methods = map[string]shed.Class{}
		for m, n := range s.Methods {
			rl.priority.Methods[m] = lookup(n)
		}
	}
	if s.Utilization != nil {
		if rl.util, err = c.utilization(*s.Utilization, cs); err != nil {
			return nil, fmt.Errorf("gateway: %s: shedding.utilization: %w", cfg.File, err)
		}
	}
	if f := s.Fleet; f != nil {
		crit := 1
		if f.CriticalFrom != "" {
			crit = cs.Len() - int(lookup(f.CriticalFrom))
		}
		rl.fleet, err = shed.NewFleet(shed.FleetOptions{Store: c.inflightStore(cfg), Key: f.Key, Cap: f.Cap,
			Reserved: f.Reserved, Classes: cs, Critical: crit, TTL: f.TTL})
		if err != nil {
			return nil, fmt.Errorf("gateway: %s: shedding.fleet: %w", cfg.File, err)
		}
	}
	return rl, nil
}

func anyAdaptive(cfg *Config) bool {
	for _, r := range cfg.Routes {
		if r.Adaptive != nil {
			return true
		}
	}
	return false
}

// wrap returns route i's handler: the shedders, then limited (the rate
// limits) around the caller's in-flight cap and the adaptive limit around
// next. limit is the rate limit middleware's Handler.
func (rl *routeLayers) wrap(i int, limit func(http.Handler) http.Handler, next http.Handler) http.Handler {
	if rl.c == nil {
		return limit(next)
	}
	r := rl.cfg.Routes[i]
	if a := r.Adaptive; a != nil {
		name := adaptiveRoute(i, r)
		next = (&httplimit.Adaptive{Limiter: rl.c.limiter(name, *a), Name: name, Refusals: rl.refusals}).Handler(
			rl.c.g.ops.countAdmitted(httplimit.DefaultAdaptivePolicy, next))
	}
	ifc := rl.cfg.InFlight
	if r.InFlight != nil {
		ifc = r.InFlight
	}
	if ifc != nil && ifc.Max > 0 {
		m := &httplimit.InFlight{Store: rl.c.inflightStore(rl.cfg), Max: ifc.Max, TTL: ifc.TTL, RetryAfter: ifc.RetryAfter,
			Identity: rl.identity, Headers: rl.cfg.Headers, OnStoreError: rl.cfg.OnStoreError, Refusals: rl.refusals, Logger: rl.c.g.log,
			Denial: r.Denial,
			Observe: func(e httplimit.InFlightEvent) {
				rl.c.inFlight.WithLabelValues(e.Outcome.String()).Inc()
				if e.Outcome == httplimit.Allowed {
					rl.c.g.ops.admitted(httplimit.DefaultInFlightPolicy)
				}
			}}
		next = m.Handler(next)
	}
	h := limit(next)
	if rl.util == nil && rl.fleet == nil {
		return h
	}
	p := rl.priority
	if r.Priority != "" {
		p.Route, p.HasRoute = p.Classes.Lookup(r.Priority)
	}
	var retry time.Duration
	if rl.cfg.Shedding != nil {
		retry = rl.cfg.Shedding.RetryAfter
	}
	cs := p.Classes
	last := "utilization" // the shedder whose admission admits (the status page's count)
	if rl.fleet != nil {
		last = "fleet"
	}
	sm := &httplimit.Shedder{Utilization: rl.util, Fleet: rl.fleet, Priority: p, Identity: rl.identity,
		RetryAfter: retry, OnStoreError: rl.cfg.OnStoreError, Refusals: rl.refusals, Logger: rl.c.g.log,
		Observe: func(e httplimit.ShedEvent) {
			rl.c.shedVec.WithLabelValues(e.Shedder, cs.Name(e.Class), e.Outcome.String()).Inc()
			if e.Outcome == httplimit.Allowed && e.Shedder == last {
				rl.c.g.ops.admitted(httplimit.ShedPolicy)
			}
		}}
	return sm.Handler(h)
}

func routeName(r Route) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return strings.Join(r.Methods, ",") + " " + r.Host + r.Path
}
