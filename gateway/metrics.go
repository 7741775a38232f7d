package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/server/admin"
	"github.com/sluicehq/sluice/internal/server/eventlog"
)

// metrics are the gateway's Prometheus collectors.
type metrics struct {
	decisions     *prometheus.CounterVec
	shadowDenials *prometheus.CounterVec
	storeErrors   *prometheus.CounterVec
	latency       prometheus.Histogram
	reloads       *prometheus.CounterVec
	refusals      *prometheus.CounterVec // every layer's refusals (refusals.go)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: counterVec("decisions_total",
			"Rate limit decisions by rule and outcome (allowed, denied, shadow_denied, store_error).", "rule", "outcome"),
		shadowDenials: counterVec("shadow_denials_total", "Requests a rule in shadow mode would have denied.", "rule"),
		storeErrors: counterVec("store_errors_total",
			"Store failures, by rule; the request then failed open or closed per fail_closed.", "rule"),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "gateway", Name: "decision_duration_seconds",
			Help:    "Time the store took to decide one rule for one request.",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
		}),
		reloads:  counterVec("config_reloads_total", "Config reloads by result (ok, invalid).", "result"),
		refusals: newRefusalsVec(),
	}
	if err := registerAll(reg, m.decisions, m.shadowDenials, m.storeErrors, m.latency, m.reloads, m.refusals); err != nil {
		return nil, err
	}
	if err := admin.RegisterRuntime(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// gaugeVec returns the gauge sluice_gateway_<name> by labels.
func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "gateway", Name: name, Help: help}, labels)
}

// counterVec returns the counter sluice_gateway_<name> by labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "gateway", Name: name, Help: help}, labels)
}

// registerAll registers cs with reg, stopping at the first error.
func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// ruleCounters are one rule's counters, looked up once per config.
type ruleCounters struct {
	outcomes [6]prometheus.Counter // by httplimit.Outcome (refunded and refund_refused too)
	shadow   prometheus.Counter
	storeErr prometheus.Counter
}

func (m *metrics) countersFor(rule string) *ruleCounters {
	rc := &ruleCounters{
		shadow:   m.shadowDenials.WithLabelValues(rule),
		storeErr: m.storeErrors.WithLabelValues(rule),
	}
	for o := range rc.outcomes {
		rc.outcomes[o] = m.decisions.WithLabelValues(rule, httplimit.Outcome(o).String())
	}
	return rc
}

// observer returns the httplimit.Middleware.Observe hook for a config
// whose rules are named names: their counters are looked up once, here,
// so that the hot path does not hash label values.
// observer counts every decision and reports store failures and shadow
// denials to the aggregated log (denials are refusals: refused reports
// them, whichever layer made them).
func (m *metrics) observer(names []string, events *eventlog.Log) func(httplimit.Event) {
	byRule := make(map[string]*ruleCounters, len(names))
	for _, n := range names {
		if byRule[n] == nil {
			byRule[n] = m.countersFor(n)
		}
	}
	return func(e httplimit.Event) {
		rc := byRule[e.Policy]
		if rc == nil {
			rc = m.countersFor(e.Policy) // not expected: every rule is known
		}
		if int(e.Outcome) < len(rc.outcomes) {
			rc.outcomes[e.Outcome].Inc()
		}
		switch e.Outcome {
		case httplimit.ShadowDenied:
			rc.shadow.Inc()
			events.Report(eventlog.ShadowDenied, e.Policy, e.Key, nil)
		case httplimit.StoreError:
			rc.storeErr.Inc()
			events.Report(eventlog.StoreError, e.Policy, e.Key, e.Err)
		}
		if e.Latency > 0 {
			m.latency.Observe(e.Latency.Seconds())
		}
	}
}
