package tlsreload

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register adds r's metrics to reg, labelled listener (a fixed name such
// as "grpc" or "public"):
//
//	sluice_tls_certificate_not_after_seconds  the served certificate's expiry, Unix seconds
//	sluice_tls_reloads_total                  loads after the first that succeeded
//	sluice_tls_reload_failures_total          loads that failed (the last good pair kept)
//
// Registering a second Reloader's metrics with another listener label on
// the same registry is allowed.
func (r *Reloader) Register(reg prometheus.Registerer, listener string) error {
	labels := prometheus.Labels{"listener": listener}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "tls", Name: "certificate_not_after_seconds",
			Help: "When the certificate being served expires, in Unix seconds.", ConstLabels: labels},
			func() float64 { return float64(r.Leaf().NotAfter.Unix()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "tls", Name: "reloads_total",
			Help: "Certificate reloads that succeeded after the files changed.", ConstLabels: labels},
			func() float64 { return float64(r.Reloads()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "tls", Name: "reload_failures_total",
			Help: "Certificate reloads that failed; the last good certificate stays served.", ConstLabels: labels},
			func() float64 { return float64(r.Failures()) }),
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
