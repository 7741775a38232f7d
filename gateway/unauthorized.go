package gateway

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/internal/server/eventlog"
)

// refusals count the requests whose credential was refused, by reason:
// sluice_gateway_unauthorized_total{reason}, one series per
// identity.Reason, made up front (an attacker picks no label).
type refusals struct {
	byReason map[identity.Reason]prometheus.Counter
	events   *eventlog.Log
}

func newRefusals(reg prometheus.Registerer) (*refusals, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "gateway", Name: "unauthorized_total",
		Help: "Requests answered 401 because their credential was refused, by reason (malformed, unknown_key, bad_signature, wrong_algorithm, expired, not_yet_valid, wrong_issuer, wrong_audience, missing_claim, conflict).",
	}, []string{"reason"})
	if err := reg.Register(vec); err != nil {
		return nil, err
	}
	r := &refusals{byReason: make(map[identity.Reason]prometheus.Counter, len(identity.Reasons))}
	for _, reason := range identity.Reasons {
		r.byReason[reason] = vec.WithLabelValues(string(reason))
	}
	return r, nil
}

// refuse answers a request whose credential was refused (err wraps
// identity.ErrUnauthorized): 401, counted by reason, and reported to the
// event log under its reason with the caller's address, never the
// credential, so a flood of bad keys writes a bounded number of lines.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, err error) {
	reason := identity.ReasonOf(err)
	if c, ok := g.refusals.byReason[reason]; ok {
		c.Inc()
	}
	host, _, splitErr := net.SplitHostPort(r.RemoteAddr)
	if splitErr != nil {
		host = r.RemoteAddr
	}
	g.events.Report(eventlog.Unauthorized, string(reason), host, nil)
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	problem(w, http.StatusUnauthorized, "invalid credentials")
}
