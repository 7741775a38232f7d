package rls

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/rules"
)

// RegisterAccessLog exports the access log's dropped lines on reg as
// sluice_rls_access_log_dropped_total; a nil l registers nothing.
func RegisterAccessLog(reg *prometheus.Registry, l *accesslog.Log) error {
	if l == nil {
		return nil
	}
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "rls", Name: "access_log_dropped_total",
		Help: "Access log lines not written: over the lines a second (--access-log-rate), or the writer behind.",
	}, func() float64 { return float64(l.Dropped()) }))
}

// logAccess writes the access log's line of each limited descriptor of a
// request: allowed, denied or shadow_denied, or store_error for them all
// when the store failed. The descriptor is its keys only: its values are
// the caller's (the identity, as configured, is the store key).
func (s *Server) logAccess(domain string, checks []check, descs []rules.Descriptor, storeErr bool) {
	for i := range checks {
		c := &checks[i]
		if c.Kind != kindLimited {
			continue
		}
		out := outcome(c, storeErr)
		if !s.access.Wants(out) {
			continue
		}
		s.access.Log(accesslog.Entry{Rule: c.ruleName(), Outcome: out, Identity: c.Request.Key, Domain: domain, Descriptor: entryKeys(descs[i].Entries)})
	}
}

// traceDecisions records each limited descriptor's decision on the call's
// span, as logAccess logs it; the store time is the call's (decide).
func traceDecisions(sp *tracing.Span, checks []check, storeErr bool) {
	for i := range checks {
		if c := &checks[i]; c.Kind == kindLimited {
			sp.Decision(c.ruleName(), outcome(c, storeErr), c.Request.Key, 0)
		}
	}
}

// outcome is a limited descriptor's outcome, as the access log and the
// spans name it.
func outcome(c *check, storeErr bool) string {
	switch {
	case storeErr:
		return accesslog.StoreError
	case c.over && c.Shadow:
		return accesslog.ShadowDenied
	case c.over:
		return accesslog.Denied
	}
	return accesslog.Allowed
}

// ruleName is the rule that decided c: its key, or "override" for a
// request's own limit.
func (c *check) ruleName() string {
	if c.Rule != nil {
		return c.Rule.Key
	}
	return "override"
}

// entryKeys is the keys of entries, comma-separated (one entry's key is
// not copied).
func entryKeys(entries []rules.Entry) string {
	if len(entries) == 1 {
		return entries[0].Key
	}
	var keys strings.Builder
	for j, e := range entries {
		if j > 0 {
			keys.WriteByte(',')
		}
		keys.WriteString(e.Key)
	}
	return keys.String()
}
