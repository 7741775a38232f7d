package rls

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/rules"
)

// metrics are envoyproxy/ratelimit's stats, as its Prometheus exporter
// names them: ratelimit.service.rate_limit.DOMAIN.KEY.total_hits becomes
// ratelimit_service_rate_limit_total_hits{domain="DOMAIN",key="KEY"}.
type metrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec

	configLoadSuccess, configLoadError prometheus.Counter
	serviceError, storeError           prometheus.Counter
	globalShadow                       prometheus.Counter

	byKey sync.Map // metric key ("domain.key_value") -> *ruleStats
}

// ruleStats are one rule's (or detailed key's) counters, resolved once.
type ruleStats struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimit", Subsystem: "service_rate_limit", Name: name, Help: help,
		}, []string{"domain", "key"})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimit", Subsystem: "service", Name: name, Help: help})
	}
	m := &metrics{
		totalHits:         vec("total_hits", "Hits counted against the rule (hits_addend summed)."),
		overLimit:         vec("over_limit", "Hits over the rule's limit."),
		nearLimit:         vec("near_limit", "Hits within the limit but past the near-limit ratio."),
		withinLimit:       vec("within_limit", "Hits within the limit."),
		shadowMode:        vec("shadow_mode", "Hits over the limit of a shadow_mode rule (answered OK)."),
		configLoadSuccess: counter("config_load_success", "Configurations loaded."),
		configLoadError:   counter("config_load_error", "Configurations refused (the previous one stays)."),
		serviceError:      counter("call_should_rate_limit_service_error", "Requests refused as invalid."),
		storeError:        counter("call_should_rate_limit_store_error", "Requests failed because the store failed."),
		globalShadow:      counter("global_shadow_mode", "Requests over the limit answered OK by the global shadow mode."),
	}
	for _, c := range []prometheus.Collector{m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode,
		m.configLoadSuccess, m.configLoadError, m.serviceError, m.storeError, m.globalShadow} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forKey returns the counters of a metric key "domain.rest".
func (m *metrics) forKey(domain, key string) *ruleStats {
	if v, ok := m.byKey.Load(key); ok {
		return v.(*ruleStats)
	}
	label := strings.TrimPrefix(key, domain+".")
	rs := &ruleStats{
		totalHits:   m.totalHits.WithLabelValues(domain, label),
		overLimit:   m.overLimit.WithLabelValues(domain, label),
		nearLimit:   m.nearLimit.WithLabelValues(domain, label),
		withinLimit: m.withinLimit.WithLabelValues(domain, label),
		shadowMode:  m.shadowMode.WithLabelValues(domain, label),
	}
	v, _ := m.byKey.LoadOrStore(key, rs)
	return v.(*ruleStats)
}

// forRule returns the counters entries count under for r: the rule's key,
// or with detailed_metric or value_to_metric, a key naming the values.
func (m *metrics) forRule(r *rules.Rule, entries []rules.Entry) *ruleStats {
	if !r.DetailedMetric {
		if v, ok := m.byKey.Load(r.Key); ok {
			return v.(*ruleStats)
		}
	}
	return m.forKey(r.Domain, r.MetricKey(entries))
}

// record counts c's outcome as envoyproxy/ratelimit's base limiter does:
// with before and after the usage around this request's hits, hits above
// the limit are over_limit (and shadow_mode for a shadow rule), hits
// between the near-limit threshold and the limit near_limit, and the hits
// of a request within the limit within_limit.
func (rs *ruleStats) record(c *check, nearRatio float64) {
	hits := uint64(c.hits)
	rs.totalHits.Add(float64(hits))
	capacity := uint64(max(0, c.limit.Capacity(c.alg)))
	before, after := uint64(c.before), uint64(c.after)
	near := uint64(float64(float32(capacity) * float32(nearRatio))) // as envoy: float32, floored
	if c.over {
		if before >= capacity {
			rs.overLimit.Add(float64(hits))
		} else {
			rs.overLimit.Add(float64(after - capacity))
			rs.nearLimit.Add(float64(capacity - max(near, before)))
		}
		if c.shadow {
			if before >= capacity {
				rs.shadowMode.Add(float64(hits))
			} else {
				rs.shadowMode.Add(float64(after - capacity))
			}
		}
		return
	}
	if after > near {
		if before >= near {
			rs.nearLimit.Add(float64(hits))
		} else {
			rs.nearLimit.Add(float64(after - near))
		}
	}
	rs.withinLimit.Add(float64(hits))
}
