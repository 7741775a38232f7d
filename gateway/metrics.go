package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/httplimit"
)

// metrics are the gateway's Prometheus collectors.
type metrics struct {
	// counters caches the decision counter of each rule and outcome, so
	// that the hot path does not hash label values.
	counters sync.Map // counterKey → prometheus.Counter

	decisions     *prometheus.CounterVec
	shadowDenials *prometheus.CounterVec
	storeErrors   *prometheus.CounterVec
	latency       prometheus.Histogram
	reloads       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "gateway", Name: "decisions_total",
			Help: "Rate limit decisions by rule and outcome (allowed, denied, shadow_denied, store_error).",
		}, []string{"rule", "outcome"}),
		shadowDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "gateway", Name: "shadow_denials_total",
			Help: "Requests a rule in shadow mode would have denied.",
		}, []string{"rule"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "gateway", Name: "store_errors_total",
			Help: "Store failures, by rule; the request then failed open or closed per fail_closed.",
		}, []string{"rule"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "gateway", Name: "decision_duration_seconds",
			Help:    "Time the store took to decide one rule for one request.",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "gateway", Name: "config_reloads_total",
			Help: "Config reloads by result (ok, invalid).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.shadowDenials, m.storeErrors, m.latency, m.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type counterKey struct {
	rule    string
	outcome httplimit.Outcome
}

// observe is the httplimit.Middleware.Observe hook.
func (m *metrics) observe(e httplimit.Event) {
	k := counterKey{e.Policy, e.Outcome}
	c, ok := m.counters.Load(k)
	if !ok {
		c, _ = m.counters.LoadOrStore(k, m.decisions.WithLabelValues(e.Policy, e.Outcome.String()))
	}
	c.(prometheus.Counter).Inc()
	switch e.Outcome {
	case httplimit.ShadowDenied:
		m.shadowDenials.WithLabelValues(e.Policy).Inc()
	case httplimit.StoreError:
		m.storeErrors.WithLabelValues(e.Policy).Inc()
	}
	if e.Latency > 0 {
		m.latency.Observe(e.Latency.Seconds())
	}
}
