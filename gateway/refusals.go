package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/server/eventlog"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/server/status"
)

// Every layer of a route (the shedders, the rate limits, the in-flight
// cap, the adaptive limit) refuses through the config's one
// httplimit.Refusals, whose observer is refused: each refusal is counted
// (sluice_gateway_refusals_total), reported to the aggregated log and
// recorded on the status page under its policy. The rate limits'
// decisions other than refusals (allowed, shadow denials, store errors)
// come from the middleware's Observe, as before.

// observers returns cfg's two hooks: the rate limit middleware's Observe
// (every rule decision: metrics, log, status page) and the one Refusals
// of every layer.
func (g *Gateway) observers(cfg *Config) (func(httplimit.Event), *httplimit.Refusals) {
	// The deny policy's Retry-After: the Redis store's breaker cooldown
	// (the gateway keeps redisstore's and redisinflight's default, 1 s).
	return g.traceObserver(g.accessObserver(g.ops.observer(g.metrics.observer(ruleNames(cfg), g.events)))),
		&httplimit.Refusals{Observe: g.accessRefused(g.ops.refused(g.metrics.refused(g.events))), UnavailableRetryAfter: redisstore.DefaultBreakerCooldown}
}

// newRefusalsVec is sluice_gateway_refusals_total.
func newRefusalsVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "gateway", Name: "refusals_total",
		Help: "Requests refused, by layer (rate_limit, in_flight, shed, adaptive) and cause (over_limit, unavailable: the layer's store could not decide).",
	}, []string{"layer", "cause"})
}

// refused returns the counting and logging half of the refusals'
// observer; its counters are looked up once, here.
func (m *metrics) refused(events *eventlog.Log) func(httplimit.Refusal) {
	var byLayer [4][2]prometheus.Counter
	for l := range byLayer {
		for c := range byLayer[l] {
			byLayer[l][c] = m.refusals.WithLabelValues(httplimit.Layer(l).String(), httplimit.Cause(c).String())
		}
	}
	return func(rf httplimit.Refusal) {
		if int(rf.Layer) < len(byLayer) && int(rf.Cause) < len(byLayer[0]) {
			byLayer[rf.Layer][rf.Cause].Inc()
		}
		switch {
		case rf.Cause == httplimit.OverLimit:
			events.Report(eventlog.Denied, rf.Policy, rf.Key, nil)
		case rf.Layer != httplimit.LayerRateLimit: // a rule's store errors are its decisions' (metrics.observer)
			events.Report(eventlog.StoreError, rf.Policy, rf.Key, rf.Err)
		}
	}
}

// refused wraps next with the status page's recording: a refusal over a
// limit is a denial of its policy's row; a store that could not decide is
// a store error of the in-flight and shedding rows (a rule's store errors
// are recorded by observer, refused or not).
func (o *ops) refused(next func(httplimit.Refusal)) func(httplimit.Refusal) {
	return func(rf httplimit.Refusal) {
		next(rf)
		row := rf.Policy // the other layers' rows are named by their policy
		if rf.Rule != nil {
			row = status.RuleID(rf.Rule)
		}
		switch {
		case rf.Cause == httplimit.OverLimit:
			o.rec.Rule(row).Record(status.Denied, rf.Key)
		case rf.Layer != httplimit.LayerRateLimit:
			o.rec.Rule(row).Record(status.StoreError, rf.Key)
		}
	}
}

// admitted counts an admitted request on the status row of a layer other
// than the rate limits (whose decisions come through observer), so that
// its denial rate has a denominator.
func (o *ops) admitted(row string) { o.rec.Rule(row).Record(status.Allowed, "") }

// countAdmitted is next counted on row: behind the adaptive limit, it
// runs for the requests the limit admitted.
func (o *ops) countAdmitted(row string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.admitted(row)
		next.ServeHTTP(w, r)
	})
}

// ruleIDs are the admin API's rules that rule names: the page's rows
// without the other layers' (an override or a percentage applies to a
// rule's checks; on the in-flight row it would show and do nothing).
func (o *ops) ruleIDs(rule string) []string {
	ids := o.door.RuleIDs(rule)
	out := ids[:0]
	for _, id := range ids {
		if rl := o.rec.Rule(id); rl == nil || !layerRow(rl.Info()) {
			out = append(out, id)
		}
	}
	return out
}

// layerRow reports whether in is one of layerInfos' rows.
func layerRow(in status.RuleInfo) bool {
	// No rule's algorithm is spelt so (gcra, token_bucket, …, quota).
	switch in.Algorithm {
	case layerInFlight, layerShedding, layerAdaptive:
		return true
	}
	return false
}

// The algorithms of layerInfos' rows.
const (
	layerInFlight = "in_flight"
	layerShedding = "shedding"
	layerAdaptive = "adaptive"
)

// layerInfos are the status page's rows for cfg's layers other than the
// rate limits: the in-flight cap, the shedders, the adaptive limits, each
// named by the policy its refusals carry.
func layerInfos(cfg *Config) []status.RuleInfo {
	var out []status.RuleInfo
	var inFlight []string
	if f := cfg.InFlight; f != nil && f.Max > 0 {
		inFlight = append(inFlight, strconv.FormatInt(f.Max, 10))
	}
	var adaptive []string
	for i, r := range cfg.Routes {
		if r.InFlight != nil && r.InFlight.Max > 0 {
			inFlight = append(inFlight, "routes["+strconv.Itoa(i)+"] "+strconv.FormatInt(r.InFlight.Max, 10))
		}
		if a := r.Adaptive; a != nil {
			adaptive = append(adaptive, adaptiveRoute(i, r))
		}
	}
	if len(inFlight) > 0 {
		out = append(out, status.RuleInfo{ID: httplimit.DefaultInFlightPolicy, Name: httplimit.DefaultInFlightPolicy,
			Domain: cfg.Domain, Limit: strings.Join(inFlight, ", ") + " in flight per caller", Algorithm: layerInFlight})
	}
	if s := cfg.Shedding; s != nil && (s.Utilization != nil || s.Fleet != nil) {
		var what []string
		if s.Utilization != nil {
			what = append(what, "utilization capacity "+strconv.FormatInt(s.Utilization.Capacity, 10))
		}
		if s.Fleet != nil {
			what = append(what, "fleet cap "+strconv.FormatInt(s.Fleet.Cap, 10))
		}
		out = append(out, status.RuleInfo{ID: httplimit.ShedPolicy, Name: httplimit.ShedPolicy, Domain: cfg.Domain,
			Limit: strings.Join(what, ", "), Algorithm: layerShedding})
	}
	if len(adaptive) > 0 {
		out = append(out, status.RuleInfo{ID: httplimit.DefaultAdaptivePolicy, Name: httplimit.DefaultAdaptivePolicy,
			Domain: cfg.Domain, Limit: strings.Join(adaptive, ", "), Algorithm: layerAdaptive})
	}
	return out
}
