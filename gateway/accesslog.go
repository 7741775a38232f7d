package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/server/accesslog"
)

// AccessLogConfig is access_log: one JSON line per decision of every
// layer (internal/server/accesslog), off when absent.
type AccessLogConfig struct {
	File         string             // file: a path, or "-" for standard error
	Sample       float64            // sample: the fraction of decisions logged (default 1)
	MaxPerSecond int                // max_per_second: lines a second at most (default 1000)
	Identity     accesslog.Identity // identity: hashed (default), clear or none
	RefusalsOnly bool               // refusals_only: leave allowed decisions out
	KeyFile      string             // key_file: the HMAC key of hashed identities (accesslog.LoadKey); empty: drawn at start
}

// accessLog decodes access_log.
func (t *top) accessLog(v *yaml.Node) {
	d, c := t.d, &AccessLogConfig{Sample: 1, Identity: accesslog.Hashed}
	fileLine := 0
	d.fields(v, "access_log", map[string]func(k, v *yaml.Node){
		"file": func(k, v *yaml.Node) {
			fileLine = v.Line
			if c.File = d.str(v, "access_log.file"); c.File != "-" && c.File != "" {
				c.File = t.rel(c.File)
			}
		},
		"sample": func(k, v *yaml.Node) { c.Sample = d.number(v, "access_log.sample", 0, 1, false) },
		"max_per_second": func(k, v *yaml.Node) {
			c.MaxPerSecond = int(d.integer(v, "access_log.max_per_second", 1, 1_000_000))
		},
		"identity": func(k, v *yaml.Node) {
			id, err := accesslog.ParseIdentity(d.str(v, "access_log.identity"))
			if err != nil {
				d.add(v.Line, "access_log.identity", "want hashed, clear or none")
			}
			c.Identity = id
		},
		"refusals_only": d.boolTo(&c.RefusalsOnly, "access_log", "refusals_only"),
		"key_file":      func(k, v *yaml.Node) { c.KeyFile = t.rel(d.str(v, "access_log.key_file")) },
	})
	if c.File == "" {
		line := v.Line
		if fileLine != 0 {
			line = fileLine
		}
		d.add(line, "access_log.file", "want a path, or - for standard error")
	}
	t.c.AccessLog = c
}

// openAccessLog starts the access log of cfg, when it has one, and
// registers sluice_gateway_access_log_dropped_total. The log is the
// process's: a reload does not change it.
func (g *Gateway) openAccessLog(cfg *Config) error {
	ac := cfg.AccessLog
	if ac == nil {
		return nil
	}
	key, err := accesslog.LoadKey(ac.KeyFile)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	w, err := accesslog.Open(ac.File)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	l, err := accesslog.New(accesslog.Options{Writer: w, Server: "gateway", Sample: ac.Sample,
		MaxPerSecond: ac.MaxPerSecond, Identity: ac.Identity, RefusalsOnly: ac.RefusalsOnly, Key: key})
	if err != nil {
		w.Close()
		return fmt.Errorf("gateway: %w", err)
	}
	err = g.registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "gateway", Name: "access_log_dropped_total",
		Help: "Access log lines not written: over access_log.max_per_second, or the writer behind.",
	}, func() float64 { return float64(l.Dropped()) }))
	if err != nil {
		l.Close()
		w.Close()
		return fmt.Errorf("gateway: metrics: %w", err)
	}
	g.access, g.accessW = l, w
	return nil
}

// closeAccessLog writes the lines waiting and closes the file.
func (g *Gateway) closeAccessLog() error {
	if g.access == nil {
		return nil
	}
	g.access.Close()
	return g.accessW.Close()
}

// accessObserver wraps the rate limits' observer with the access log
// (every rule decision); without an access log it is next itself.
func (g *Gateway) accessObserver(next func(httplimit.Event)) func(httplimit.Event) {
	l := g.access
	if l == nil {
		return next
	}
	return func(e httplimit.Event) {
		next(e)
		if e.Outcome > httplimit.StoreError { // refunds are not decisions
			return
		}
		if out := e.Outcome.String(); l.Wants(out) {
			method, path := requestOf(e.Ctx)
			l.Log(accesslog.Entry{Rule: e.Policy, Outcome: out, Layer: httplimit.LayerRateLimit.String(), Identity: e.Key,
				Method: method, Path: path})
		}
	}
}

// accessRefused wraps the refusals' observer with the access log of the
// layers other than the rate limits (whose refusals accessObserver logs
// as decisions); without an access log it is next itself.
func (g *Gateway) accessRefused(next func(httplimit.Refusal)) func(httplimit.Refusal) {
	l := g.access
	if l == nil {
		return next
	}
	return func(rf httplimit.Refusal) {
		next(rf)
		if rf.Layer == httplimit.LayerRateLimit {
			return
		}
		out := accesslog.Denied
		if rf.Cause == httplimit.Unavailable {
			out = accesslog.StoreError
		}
		method, path := requestOf(rf.Ctx)
		l.Log(accesslog.Entry{Rule: rf.Policy, Outcome: out, Layer: rf.Layer.String(), Identity: rf.Key, Method: method, Path: path})
	}
}
