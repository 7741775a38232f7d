package rls

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/eventlog"
	"github.com/sluicehq/sluice/rules"
)

// Bounds on the series that request values create. A rule with
// detailed_metric or value_to_metric, and a limit override, name their
// series after the values of each request (envoyproxy/ratelimit never drops
// them: a flood of fresh values grows its memory and /metrics without
// bound). sluice gives each such rule, and the overrides of each domain, at
// most MaxDetailedSeries keys of their own; later values count under one
// overflow key, and each descriptor counted there adds one to
// ratelimit_service_rate_limit_detailed_metric_overflow with that key. The
// first values seen keep their series for the life of the server.
const (
	// DefaultMaxDetailedSeries is the number of detailed keys a rule (or a
	// domain's overrides) gets when the option is zero.
	DefaultMaxDetailedSeries = 1000
	// MaxMetricKeyLen is the most bytes of a key label made from request
	// values: a longer one is cut at a UTF-8 boundary, and values that share
	// their first MaxMetricKeyLen bytes share a series.
	MaxMetricKeyLen = 256
	// OverflowKeySuffix makes a rule's overflow key from its key:
	// "detailed.__overflow__" for the rule at "domain.detailed".
	OverflowKeySuffix = ".__overflow__"
	// OverrideOverflowKey is the overflow key of a domain's limit
	// overrides.
	OverrideOverflowKey = "__overflow__"
)

// metrics are envoyproxy/ratelimit's stats, as its Prometheus mapping
// names them: ratelimit.service.rate_limit.DOMAIN.K1.K2.total_hits becomes
// ratelimit_service_rate_limit_total_hits{domain="DOMAIN",key1="K1",key2="K2"}
// (MetricLabelsEnvoy), or with MetricLabelsSluice
// ratelimit_service_rate_limit_total_hits{domain="DOMAIN",key="K1.K2"}.
//
// Memory and series are bounded: a rule's own key per rule, at most
// maxDetailed (+1 overflow) keys per detailed or value_to_metric rule and
// per domain's overrides, each key at most MaxMetricKeyLen bytes.
type metrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec
	detailedOverflow, overLimitLocalCache                    *prometheus.CounterVec
	domainNotFoundVec                                        *prometheus.CounterVec

	configLoadSuccess, configLoadError svcCounter
	serviceError, storeError           svcCounter
	globalShadow                       svcCounter

	sd         *Statsd // nil: no statsd output
	localCache bool    // over_limit_with_local_cache series (Options.LocalCacheSize)

	maxDetailed int64 // detailed keys per family; 0: none (all overflow)
	envoyLabels bool  // MetricLabelsEnvoy: key1 and key2 rather than key

	byKey     sync.Map // metric key ("domain.key_value") -> *ruleStats
	unknown   sync.Map // unknown domain -> *notFound
	nUnknown  atomic.Int64
	rules     sync.Map // rule key -> *family
	overrides sync.Map // domain -> *family
}

// ruleStats are one rule's (or detailed key's) counters, resolved once.
type ruleStats struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode prometheus.Counter
	localCache                                               prometheus.Counter // over_limit_with_local_cache; nil without a local cache
	sd                                                       *statsdRule        // nil without statsd
}

// svcCounter is a service-wide counter, in Prometheus and, with statsd,
// there too.
type svcCounter struct {
	prometheus.Counter
	sd gostats.Counter
}

func (c svcCounter) Inc() {
	c.Counter.Inc()
	if c.sd != nil {
		c.sd.Inc()
	}
}

// attachStatsd sends m's stats to sd too. Call it before m counts
// anything.
func (m *metrics) attachStatsd(sd *Statsd) {
	m.sd = sd
	svc := sd.service()
	m.configLoadSuccess.sd, m.configLoadError.sd = svc.configLoadSuccess, svc.configLoadError
	m.serviceError.sd, m.storeError.sd, m.globalShadow.sd = svc.serviceError, svc.redisError, svc.globalShadow
}

// family is the bounded set of detailed keys of one rule, or of one
// domain's overrides.
type family struct {
	domain, overflowLabel string
	n                     atomic.Int64 // detailed keys created

	once       sync.Once
	overflow   *ruleStats
	overflowed prometheus.Counter
}

// MetricLabels selects the labels of the per-rule metrics (total_hits,
// over_limit, near_limit, within_limit, shadow_mode and
// detailed_metric_overflow).
type MetricLabels uint8

const (
	// MetricLabelsEnvoy (the zero value) labels them as envoyproxy/ratelimit's
	// Prometheus mapping (src/stats/prom/default_mapper.yaml) does, so that
	// its dashboards work: domain, key1 (the stats key's first dot-separated
	// part after the domain) and key2 (its second part, "" when there is
	// none, which Prometheus treats as absent); later parts are dropped, as
	// that mapping drops them.
	MetricLabelsEnvoy MetricLabels = iota
	// MetricLabelsSluice labels them domain and key, the whole stats key
	// after the domain: "user_alice.path" rather than key1="user_alice",
	// key2="path".
	MetricLabelsSluice
)

var metricLabelsNames = [...]string{MetricLabelsEnvoy: "envoy", MetricLabelsSluice: "sluice"}

func (l MetricLabels) String() string {
	if int(l) < len(metricLabelsNames) {
		return metricLabelsNames[l]
	}
	return "MetricLabels(" + strconv.Itoa(int(l)) + ")"
}

// ParseMetricLabels returns the scheme named s: envoy (or "") or sluice.
func ParseMetricLabels(s string) (MetricLabels, error) {
	switch s {
	case "", "envoy":
		return MetricLabelsEnvoy, nil
	case "sluice":
		return MetricLabelsSluice, nil
	}
	return 0, fmt.Errorf("unknown metric label scheme %q (want envoy or sluice)", s)
}

// newMetrics registers the metrics with the default bound.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	return newBoundedMetrics(reg, 0)
}

// newBoundedMetrics registers the metrics in reg, labelled domain and key,
// with at most maxDetailed detailed keys per rule and per domain's
// overrides: 0 means DefaultMaxDetailedSeries, a negative number none
// (every request value counts under the overflow key).
func newBoundedMetrics(reg prometheus.Registerer, maxDetailed int) (*metrics, error) {
	return newSchemeMetrics(reg, maxDetailed, MetricLabelsSluice)
}

// newSchemeMetrics is newBoundedMetrics with the labels of scheme.
func newSchemeMetrics(reg prometheus.Registerer, maxDetailed int, scheme MetricLabels) (*metrics, error) {
	labels := []string{"domain", "key"}
	if scheme == MetricLabelsEnvoy {
		labels = []string{"domain", "key1", "key2"}
	}
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimit", Subsystem: "service_rate_limit", Name: name, Help: help,
		}, labels)
	}
	counter := func(name, help string) svcCounter {
		return svcCounter{Counter: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimit", Subsystem: "service", Name: name, Help: help})}
	}
	m := &metrics{
		totalHits:   vec("total_hits", "Hits counted against the rule (hits_addend summed)."),
		overLimit:   vec("over_limit", "Hits over the rule's limit."),
		nearLimit:   vec("near_limit", "Hits within the limit but past the near-limit ratio."),
		withinLimit: vec("within_limit", "Hits within the limit."),
		shadowMode:  vec("shadow_mode", "Hits over the limit of a shadow_mode rule (answered OK)."),
		detailedOverflow: vec("detailed_metric_overflow",
			"Descriptors counted under an overflow key because their rule (or domain's overrides) had all its detailed keys."),
		overLimitLocalCache: vec("over_limit_with_local_cache", "Hits over the limit answered from the local over-limit cache."),
		domainNotFoundVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimit", Subsystem: "service_rate_limit", Name: "domain_not_found",
			Help: "Descriptors of requests for a domain no configuration has (the first MaxDetailedSeries domains, then __overflow__).",
		}, []string{"domain"}),
		configLoadSuccess: counter("config_load_success", "Configurations loaded."),
		configLoadError:   counter("config_load_error", "Configurations refused (the previous one stays)."),
		serviceError:      counter("call_should_rate_limit_service_error", "Requests refused as invalid."),
		storeError:        counter("call_should_rate_limit_store_error", "Requests failed because the store failed."),
		globalShadow:      counter("global_shadow_mode", "Requests over the limit answered OK by the global shadow mode."),
		envoyLabels:       scheme == MetricLabelsEnvoy,
	}
	switch {
	case maxDetailed == 0:
		m.maxDetailed = DefaultMaxDetailedSeries
	case maxDetailed > 0:
		m.maxDetailed = int64(maxDetailed)
	}
	for _, c := range []prometheus.Collector{m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode,
		m.detailedOverflow, m.overLimitLocalCache, m.domainNotFoundVec, m.configLoadSuccess, m.configLoadError, m.serviceError, m.storeError, m.globalShadow} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forKey returns the counters of a limit override's metric key
// "domain.rest": at most maxDetailed keys per domain, then the domain's
// OverrideOverflowKey.
func (m *metrics) forKey(domain, key string) *ruleStats {
	key = boundKey(domain, key)
	if v, ok := m.byKey.Load(key); ok {
		return v.(*ruleStats)
	}
	return m.newDetailed(m.family(&m.overrides, domain, domain, ""), domain, key)
}

// forRule returns the counters entries count under for r: the rule's key,
// or with detailed_metric or value_to_metric, a key naming the values, up
// to maxDetailed keys per rule and then the rule's overflow key.
func (m *metrics) forRule(r *rules.Rule, entries []rules.Entry) *ruleStats {
	if !r.DetailedMetric {
		if v, ok := m.byKey.Load(r.Key); ok {
			return v.(*ruleStats)
		}
	}
	key := r.MetricKey(entries)
	if key == r.Key {
		// The rule's own key, from the configuration: one per rule.
		if v, ok := m.byKey.Load(key); ok {
			return v.(*ruleStats)
		}
		rs := m.newStats(r.Domain, labelOf(r.Domain, key))
		v, _ := m.byKey.LoadOrStore(key, rs)
		return v.(*ruleStats)
	}
	key = boundKey(r.Domain, key)
	if v, ok := m.byKey.Load(key); ok {
		return v.(*ruleStats)
	}
	return m.newDetailed(m.family(&m.rules, r.Key, r.Domain, r.Key), r.Domain, key)
}

// family returns the family named id in fams, creating it: the family of
// the rule at ruleKey, or with ruleKey "", of domain's overrides.
func (m *metrics) family(fams *sync.Map, id, domain, ruleKey string) *family {
	if v, ok := fams.Load(id); ok {
		return v.(*family)
	}
	label := OverrideOverflowKey
	if ruleKey != "" {
		label = eventlog.Prefix(labelOf(domain, ruleKey)+OverflowKeySuffix, MaxMetricKeyLen)
	}
	v, _ := fams.LoadOrStore(id, &family{domain: domain, overflowLabel: label})
	return v.(*family)
}

// newDetailed returns the counters of key, a request's metric key already
// cut by boundKey and missing from byKey: new counters if f has room, else
// f's overflow counters.
func (m *metrics) newDetailed(f *family, domain, key string) *ruleStats {
	if !utf8.ValidString(key) {
		// Prometheus refuses such label values; requests over gRPC or JSON
		// cannot carry them, but the key must not panic either way.
		key = boundKey(domain, strings.ToValidUTF8(key, "\uFFFD"))
		if v, ok := m.byKey.Load(key); ok {
			return v.(*ruleStats)
		}
	}
	if f.n.Load() >= m.maxDetailed {
		return m.overflow(f)
	}
	if f.n.Add(1) > m.maxDetailed {
		f.n.Add(-1) // another key took the last slot
		return m.overflow(f)
	}
	key = strings.Clone(key) // not the request's memory
	rs := m.newStats(domain, labelOf(domain, key))
	v, loaded := m.byKey.LoadOrStore(key, rs)
	if loaded {
		f.n.Add(-1) // created concurrently: one key, one slot
	}
	return v.(*ruleStats)
}

// overflow counts one descriptor over f's bound and returns f's overflow
// counters.
func (m *metrics) overflow(f *family) *ruleStats {
	f.once.Do(func() {
		f.overflow = m.newStats(f.domain, f.overflowLabel)
		f.overflowed = m.detailedOverflow.WithLabelValues(m.labelValues(f.domain, f.overflowLabel)...)
	})
	f.overflowed.Inc()
	return f.overflow
}

func (m *metrics) newStats(domain, label string) *ruleStats {
	v := m.labelValues(domain, label)
	rs := &ruleStats{
		totalHits:   m.totalHits.WithLabelValues(v...),
		overLimit:   m.overLimit.WithLabelValues(v...),
		nearLimit:   m.nearLimit.WithLabelValues(v...),
		withinLimit: m.withinLimit.WithLabelValues(v...),
		shadowMode:  m.shadowMode.WithLabelValues(v...),
	}
	if m.localCache {
		// Only with a local cache: without one, the series would stay 0.
		rs.localCache = m.overLimitLocalCache.WithLabelValues(v...)
	}
	if m.sd != nil {
		// The same bounded keys as the series: statsd keys are made here
		// only.
		rs.sd = m.sd.rule(domain, label)
	}
	return rs
}

// notFound counts the descriptors of one unknown domain.
type notFound struct {
	p  prometheus.Counter
	sd gostats.Counter // nil without statsd
}

// domainNotFound counts n descriptors of a request for domain, which no
// configuration has: envoyproxy/ratelimit's
// ratelimit.service.rate_limit.DOMAIN.domain_not_found. Request values
// name these counters, so they are bounded as detailed keys are: the first
// maxDetailed domains (cut to MaxMetricKeyLen bytes) get their own, later
// ones count under OverrideOverflowKey.
func (m *metrics) domainNotFound(domain string, n int) {
	domain = eventlog.Prefix(domain, MaxMetricKeyLen)
	v, ok := m.unknown.Load(domain)
	if !ok {
		if !utf8.ValidString(domain) {
			domain = strings.ToValidUTF8(domain, "\uFFFD")
		}
		if m.nUnknown.Add(1) > m.maxDetailed {
			m.nUnknown.Add(-1)
			domain = OverrideOverflowKey
		} else {
			domain = strings.Clone(domain) // not the request's memory
		}
		nf := &notFound{p: m.domainNotFoundVec.WithLabelValues(domain)}
		if m.sd != nil {
			nf.sd = m.sd.domainNotFound(domain)
		}
		var loaded bool
		if v, loaded = m.unknown.LoadOrStore(domain, nf); loaded && domain != OverrideOverflowKey {
			m.nUnknown.Add(-1) // created concurrently: one domain, one slot
		}
	}
	nf := v.(*notFound)
	nf.p.Add(float64(n))
	if nf.sd != nil {
		nf.sd.Add(uint64(n))
	}
}

// labelValues are the label values of a stats key's label (labelOf) in
// m's scheme: domain and key, or domain, key1 and key2.
func (m *metrics) labelValues(domain, label string) []string {
	if !m.envoyLabels {
		return []string{domain, label}
	}
	key1, rest, _ := strings.Cut(label, ".")
	key2, _, _ := strings.Cut(rest, ".")
	return []string{domain, key1, key2}
}

// labelOf is the key label of the metric key "domain.rest": rest.
func labelOf(domain, key string) string {
	if len(key) > len(domain) && key[len(domain)] == '.' && key[:len(domain)] == domain {
		return key[len(domain)+1:]
	}
	return key
}

// boundKey cuts the metric key "domain.rest" so that its label has at most
// MaxMetricKeyLen bytes. It does not allocate.
func boundKey(domain, key string) string {
	label := labelOf(domain, key)
	return key[:len(key)-len(label)+len(eventlog.Prefix(label, MaxMetricKeyLen))]
}

// record counts c's outcome as envoyproxy/ratelimit's base limiter does:
// with before and after the usage around this request's hits, hits above
// the limit are over_limit (and shadow_mode for a shadow rule), hits
// between the near-limit threshold and the limit near_limit, and the hits
// of a request within the limit within_limit. A descriptor answered from
// the local over-limit cache counts all its hits as over_limit and
// over_limit_with_local_cache.
func (rs *ruleStats) record(c *check, nearRatio float64) {
	hits := uint64(c.Request.N)
	var over, nearHits, within, shadow, cached uint64
	capacity := uint64(max(0, c.Request.Limit.Capacity(c.Request.Algorithm)))
	before, after := uint64(c.before), uint64(c.after)
	near := uint64(float64(float32(capacity) * float32(nearRatio))) // as envoy: float32, floored
	switch {
	case c.cached:
		over, cached = hits, hits
		if c.Shadow {
			shadow = hits
		}
	case c.over:
		if before >= capacity {
			over = hits
		} else {
			over = after - capacity
			nearHits = capacity - max(near, before)
		}
		if c.Shadow {
			shadow = over
		}
	default:
		if after > near {
			if before >= near {
				nearHits = hits
			} else {
				nearHits = after - near
			}
		}
		within = hits
	}
	rs.add(hits, over, nearHits, within, shadow, cached)
}

// add adds to each counter, in Prometheus and statsd; a counter left at 0
// is not touched.
func (rs *ruleStats) add(total, over, near, within, shadow, cached uint64) {
	rs.totalHits.Add(float64(total))
	if over > 0 {
		rs.overLimit.Add(float64(over))
	}
	if near > 0 {
		rs.nearLimit.Add(float64(near))
	}
	if within > 0 {
		rs.withinLimit.Add(float64(within))
	}
	if shadow > 0 {
		rs.shadowMode.Add(float64(shadow))
	}
	if cached > 0 && rs.localCache != nil {
		rs.localCache.Add(float64(cached))
	}
	if sd := rs.sd; sd != nil {
		sd.totalHits.Add(total)
		sd.overLimit.Add(over)
		sd.nearLimit.Add(near)
		sd.withinLimit.Add(within)
		sd.shadowMode.Add(shadow)
		sd.localCache.Add(cached)
	}
}
