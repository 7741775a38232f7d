package rls

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// configHealth applies Options.HealthyWithConfig: with it, the health
// service and /healthcheck say NOT_SERVING while set has no domain, and
// SERVING once it has one, as envoyproxy/ratelimit's
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED does. After Shutdown the health
// service stays NOT_SERVING whatever comes.
func (s *Server) configHealth(set *rules.Set) {
	if !s.healthyWithConfig {
		return
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if len(set.Domains()) > 0 {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
}

// DebugHandler serves GET /rlconfig, the rules in use as
// envoyproxy/ratelimit's debug port prints them (WriteConfig), and passes
// every other request to next (nil: 404), for a debug listener beside
// /debug/pprof/.
func (s *Server) DebugHandler(next http.Handler) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /rlconfig", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		WriteConfig(w, s.Rules())
	})
	mux.Handle("/", next)
	return mux
}

// WriteConfig writes one line per rule of set, domain by domain in name
// order and in file order within a domain, as envoyproxy/ratelimit's
// /rlconfig writes its rate limits ("KEY: unit=SECOND
// requests_per_unit=10, shadow_mode: false, quota_mode: false"), followed
// by what sluice adds: the algorithm and burst when the rule names one, an
// unlimited rule or a calendar quota, the rule's name when it has its own,
// and the file and line it comes from.
func WriteConfig(w io.Writer, set *rules.Set) error {
	var b strings.Builder
	for _, d := range set.Domains() {
		for _, r := range set.Config(d).Rules() {
			writeRule(&b, r)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRule(b *strings.Builder, r *rules.Rule) {
	b.WriteString(r.Key)
	b.WriteString(": ")
	switch {
	case r.Unlimited:
		b.WriteString("unlimited")
	case r.Quota != nil:
		fmt.Fprintf(b, "quota=%s limit=%d", r.Quota.Period, r.Quota.Limit)
	case r.Unit != "":
		unit := strings.ToUpper(r.Unit)
		if r.UnitMultiplier > 1 {
			fmt.Fprintf(b, "unit=%s unit_multiplier=%d requests_per_unit=%d", unit, r.UnitMultiplier, r.Limit.Rate)
		} else {
			fmt.Fprintf(b, "unit=%s requests_per_unit=%d", unit, r.Limit.Rate)
		}
	default:
		fmt.Fprintf(b, "window=%s requests=%d", r.Limit.Period, r.Limit.Rate)
	}
	fmt.Fprintf(b, ", shadow_mode: %t, quota_mode: %t", r.ShadowMode, r.QuotaMode)
	if r.Algorithm != ratelimit.FixedWindow && !r.Unlimited && r.Quota == nil {
		fmt.Fprintf(b, ", algorithm: %s", r.Algorithm)
		if r.Limit.Burst > 0 && r.Limit.Burst != r.Limit.Rate {
			fmt.Fprintf(b, ", burst: %d", r.Limit.Burst)
		}
	}
	if r.Name != r.Key {
		fmt.Fprintf(b, ", name: %s", r.Name)
	}
	if r.File != "" {
		fmt.Fprintf(b, " (%s:%d)", r.File, r.Line)
	}
	b.WriteByte('\n')
}
