package rls

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/accesslog"
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
		out := accesslog.Allowed
		switch {
		case storeErr:
			out = accesslog.StoreError
		case c.over && c.Shadow:
			out = accesslog.ShadowDenied
		case c.over:
			out = accesslog.Denied
		}
		if !s.access.Wants(out) {
			continue
		}
		name := "override"
		if c.Rule != nil {
			name = c.Rule.Key
		}
		s.access.Log(accesslog.Entry{Rule: name, Outcome: out, Identity: c.Request.Key, Domain: domain, Descriptor: entryKeys(descs[i].Entries)})
	}
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
