package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/server/status"
)

// ops is what the gateway shows and lets operators do beyond limiting:
// the status page (/status, /status.json) and the admin API on the admin
// listener (adminapi.go), and the callers' /rate_limit on the public one
// (ratelimitendpoint.go). It records every decision the middleware
// observes: per rule, a minute ring and the top-K denied and
// shadow-denied keys (server/status).
type ops struct {
	g       *Gateway
	rec     *status.Recorder
	door    *status.Door
	page    *status.Server
	control *control.Control
	api     *control.API
	token   atomic.Pointer[string]
	// resolver is the served config's, for the lookups of addresses
	// (an IPv6 address is grouped by ipv6_prefix as a request's is).
	resolver atomic.Pointer[identity.Resolver]
	// ownLimit limits calls to /rate_limit per identity.
	ownLimit *memstore.Store
}

func newOps(ctx context.Context, g *Gateway) (*ops, error) {
	o := &ops{g: g, rec: status.NewRecorder(status.Options{})}
	var copts control.Options
	copts.Logger = g.log
	if r := g.st.Redis; r != nil {
		copts.Settings = r // overrides and percentages shared by the fleet
	}
	o.control = control.New(ctx, copts)
	actions, err := control.NewActions(g.registry)
	if err != nil {
		o.control.Close()
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	o.door = &status.Door{Recorder: o.rec, Control: func() *control.Control { return o.control }, Checks: o.syntheticChecks,
		Peek: func(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
			return o.g.store.Apply(ctx, req)
		},
		Shadow: func() bool { return o.g.Config().Shadow }}
	o.page = &status.Server{Name: "gateway", Recorder: o.rec, Logger: g.log, Store: o.storeInfo, Lookup: o.door.Lookup,
		Enforce: o.door.Enforce, Notes: o.notes}
	o.api = &control.API{Control: o.control, Token: o.adminToken, Targets: o.door.Targets, Rules: o.ruleIDs, Logger: g.log, Actions: actions, Events: g.events}
	switch {
	case g.st.Redis != nil:
		o.api.Resetter = g.st.Redis
	case g.st.Memory != nil:
		o.api.Resetter = g.st.Memory
	}
	o.ownLimit = memstore.New(memstore.Options{MaxKeys: 1 << 16})
	return o, nil
}

func (o *ops) close() {
	o.control.Close()
	o.ownLimit.Close()
}

// configure takes a config the gateway is about to serve: its rules for
// the page, its admin token, and its /rate_limit route on mux.
func (o *ops) configure(cfg *Config, mux *http.ServeMux, res cachedIdentity) error {
	tok, err := control.LoadToken(cfg.AdminTokenFile)
	if err != nil {
		return fmt.Errorf("gateway: %s: admin_token_file: %w", cfg.File, err)
	}
	if cfg.RateLimitEndpoint != "" {
		h := &rateLimitEndpoint{o: o, cfg: cfg, resolver: res}
		if err := register(mux, "GET "+cfg.RateLimitEndpoint, h); err != nil {
			return fmt.Errorf("gateway: %s: rate_limit_endpoint: %w", cfg.File, err)
		}
	}
	o.token.Store(&tok)
	o.resolver.Store(res.Resolver)
	o.rec.SetRules(append(ruleInfos(cfg), layerInfos(cfg)...)) // layerInfos: refusals.go
	return nil
}

// ruleInfos describes cfg's rules that can decide (not unlimited, not
// disabled) in its domain.
func ruleInfos(cfg *Config) []status.RuleInfo {
	if cfg.Rules == nil || cfg.Rules.Config(cfg.Domain) == nil {
		return nil
	}
	disabled := map[string]bool{}
	for _, n := range cfg.DisabledRules {
		disabled[n] = true
	}
	var out []status.RuleInfo
	for _, r := range cfg.Rules.Config(cfg.Domain).Rules() {
		if r.Unlimited || disabled[r.Name] {
			continue
		}
		out = append(out, status.Info(r, cfg.Shadow))
	}
	return out
}

// observer wraps the metrics' Observe hook with the page's recording of
// the rules' decisions; their denials are recorded as refusals (refused,
// refusals.go), with every other layer's.
func (o *ops) observer(next func(httplimit.Event)) func(httplimit.Event) {
	return func(e httplimit.Event) {
		next(e)
		var out status.Outcome
		switch e.Outcome {
		case httplimit.Allowed:
			out = status.Allowed
		case httplimit.ShadowDenied:
			out = status.ShadowDenied
		case httplimit.StoreError:
			out = status.StoreError
		default:
			return
		}
		if e.Rule != nil {
			o.rec.Rule(status.RuleID(e.Rule)).Record(out, e.Key)
		}
	}
}

// adjuster is the middleware's Adjust hook for cfg: the admin API's
// overrides and percentage enforcement (status.Door). The global shadow:
// true wins.
func (o *ops) adjuster(cfg *Config) func(*http.Request, *rules.Check) {
	globalShadow := cfg.Shadow
	return func(_ *http.Request, c *rules.Check) {
		o.door.AdjustLimit(c.Rule, c.Request.Key, &c.Request.Limit, &c.Shadow)
		c.Shadow = c.Shadow || globalShadow
	}
}

func (o *ops) storeInfo() status.StoreInfo {
	ok, detail := o.g.st.Ready()
	return status.StoreInfo{URL: o.g.st.URL(), OK: ok, Detail: detail, FailurePolicy: o.g.Config().OnStoreError.String()}
}

func (o *ops) notes() []string {
	var out []string
	where := "in this process"
	if o.control.Shared() {
		where = "shared through Redis"
	}
	if ovs := o.control.Overrides(); len(ovs) > 0 {
		for _, ov := range ovs {
			out = append(out, fmt.Sprintf("override on %s for %s: %s until %s (%s)", ov.Rule, ov.Who, ov.Limit, ov.Until.UTC().Format(time.RFC3339), where))
		}
	}
	if p := o.token.Load(); p == nil || *p == "" {
		out = append(out, "admin API disabled (no admin_token_file, no $"+control.TokenEnv+")")
	}
	return out
}

// parseIdentity reads an identity as the page and the admin API take it:
// "user:<id>", "ip:<address>", an IP address, or a user ID.
func parseIdentity(s string) (identity.Identity, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return identity.Identity{}, errors.New("empty identity")
	case strings.HasPrefix(s, "user:"):
		if s == "user:" {
			return identity.Identity{}, errors.New("empty user ID")
		}
		return identity.Identity{User: s[5:], Authenticated: true}, nil
	case strings.HasPrefix(s, "ip:"):
		a, err := netip.ParseAddr(s[3:])
		if err != nil {
			return identity.Identity{}, fmt.Errorf("%q is not an IP address", s[3:])
		}
		return identity.Identity{IP: a.Unmap()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return identity.Identity{IP: a.Unmap()}, nil
	}
	return identity.Identity{User: s, Authenticated: true}, nil
}

// checksFor returns the checks cfg's routes make for a request r of
// identity id: every route's descriptors, resolved as the middleware
// would (status.Door keeps the limited ones and adjusts them).
func (o *ops) checksFor(cfg *Config, r *http.Request, id identity.Identity) ([]rules.Check, error) {
	if cfg.Rules == nil || cfg.Disabled {
		return nil, nil
	}
	var descs []rules.Descriptor
	for _, rc := range cfg.Routes {
		for _, d := range rc.Descriptors {
			if entries, ok := d.AppendEntries(nil, r, id); ok && len(entries) > 0 {
				descs = append(descs, rules.Descriptor{Entries: entries})
			}
		}
	}
	disabled := map[string]bool{}
	for _, n := range cfg.DisabledRules {
		disabled[n] = true
	}
	return cfg.Rules.Resolve(nil, rules.Input{Domain: cfg.Domain, Descriptors: descs, Shadow: cfg.Shadow, Disabled: disabled})
}

// syntheticChecks are the checks of identity s (see parseIdentity) on
// every route: a request to each route's path from that identity.
func (o *ops) syntheticChecks(ctx context.Context, s string) ([]rules.Check, error) {
	id, err := parseIdentity(s)
	if err != nil {
		return nil, err
	}
	cfg := o.g.Config()
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/", nil)
	if id.IP.IsValid() {
		r.RemoteAddr = netip.AddrPortFrom(id.IP, 1).String()
		if res := o.resolver.Load(); res != nil {
			// An anonymous request from that address, resolved as the
			// gateway resolves one (ipv6_prefix included).
			if rid, err := res.Resolve(r); err == nil {
				id = rid
			}
		}
	}
	return o.checksFor(cfg, r, id)
}
