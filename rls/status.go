package rls

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/internal/server/status"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// ops is the RLS's status page (/status, /status.json) and admin API
// (/admin/..., with SetAdmin) on its HTTP listener. It records each
// limited descriptor's outcome per rule: a minute ring and the top-K
// denied and shadow-denied keys (internal/server/status). A descriptor's
// identity is its store key, the descriptor's values; rules are named by
// their Key ("domain.key_value.key2"), unique across domains.
type ops struct {
	s       *Server
	policy  atomic.Pointer[string] // the failure policy's name (SetFailurePolicy)
	rec     *status.Recorder
	page    *status.Server
	control atomic.Pointer[control.Control]
	api     atomic.Pointer[control.API]
	mu      sync.Mutex
	byRule  atomic.Pointer[ruleTable]
}

// ruleTable maps one rule set's rules to their recorders.
type ruleTable struct {
	set  *rules.Set
	rule map[*rules.Rule]*status.Rule
}

func newOps(s *Server) *ops {
	o := &ops{s: s, rec: status.NewRecorder(status.Options{Now: s.now})}
	o.control.Store(control.New(context.Background(), control.Options{Logger: s.log, Now: s.now}))
	o.page = &status.Server{Name: "rls", Recorder: o.rec, Logger: s.log, Lookup: o.lookup, Enforce: o.enforce,
		Store: o.storeInfo}
	return o
}

func (o *ops) close() {
	o.control.Load().Close()
}

// SetAdmin turns the admin API on: token is its bearer token ("" keeps it
// refused; see control.LoadToken), resetter forgets keys (the store, when
// it is a ratelimit.Resetter), and settings, when not nil (a Redis
// store), shares overrides and percentages with every process on it.
// Call it before serving.
func (s *Server) SetAdmin(token string, resetter ratelimit.Resetter, settings control.Settings, actions *prometheus.CounterVec) {
	o := s.ops
	if settings != nil {
		old := o.control.Load()
		o.control.Store(control.New(context.Background(), control.Options{Settings: settings, Logger: s.log, Now: s.now}))
		old.Close()
	}
	o.api.Store(&control.API{Control: o.control.Load(), Token: func() string { return token }, Targets: o.targets,
		Rules: o.ruleKeys, Resetter: resetter, Logger: s.log, Actions: actions, Events: s.events})
}

// SetFailurePolicy names, on the status page, what the server answers
// when its store fails (sluice rls's --on-store-error; error when not set).
func (s *Server) SetFailurePolicy(p ratelimit.FailurePolicy) {
	name := p.String()
	s.ops.policy.Store(&name)
}

// register adds the page and the admin API to mux.
func (o *ops) register(mux *http.ServeMux) {
	o.page.Register(mux)
	mux.Handle("/admin/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api := o.api.Load()
		if api == nil {
			api = &control.API{Control: o.control.Load()} // no token: refused
		}
		m := http.NewServeMux()
		api.Register(m)
		m.ServeHTTP(w, r)
	}))
}

// table returns the recorders of the rule set in use, rebuilt when the
// set changed.
func (o *ops) table() *ruleTable {
	set := o.s.set.Load()
	if t := o.byRule.Load(); t != nil && t.set == set {
		return t
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.byRule.Load(); t != nil && t.set == set {
		return t
	}
	var infos []status.RuleInfo
	var rs []*rules.Rule
	for _, dom := range set.Domains() {
		for _, r := range set.Config(dom).Rules() {
			if r.Unlimited {
				continue
			}
			infos = append(infos, ruleInfo(r, o.s.shadow))
			rs = append(rs, r)
		}
	}
	o.rec.SetRules(infos)
	t := &ruleTable{set: set, rule: make(map[*rules.Rule]*status.Rule, len(rs))}
	for _, r := range rs {
		t.rule[r] = o.rec.Rule(r.Key)
	}
	o.byRule.Store(t)
	return t
}

func ruleInfo(r *rules.Rule, shadow bool) status.RuleInfo {
	in := status.RuleInfo{ID: r.Key, Name: r.Key, Domain: r.Domain, Shadow: r.ShadowMode || shadow}
	if r.HasName() {
		in.Name = r.Name + " (" + r.Key + ")"
	}
	if r.Quota != nil {
		in.Limit = strconv.FormatInt(r.Quota.Limit, 10) + "/" + r.Quota.Period
		in.Algorithm, in.Quota = "quota", r.Quota.Limit
		return in
	}
	in.Limit, in.Algorithm = r.Limit.String(), r.Algorithm.String()
	q, w := r.Limit.Policy(r.Algorithm)
	in.Quota, in.Window = q, int64(w/time.Second)
	if r.QuotaMode {
		in.Algorithm += " (quota_mode)"
	}
	return in
}

// adjust applies the admin API's override and percentage enforcement to a
// limited check.
func (o *ops) adjust(c *check) {
	if c.rule == nil {
		return
	}
	lim := c.limit
	o.control.Load().Adjust(c.rule.Key, c.key, &lim, &c.shadow)
	if c.rule.Quota == nil { // a calendar quota's window is not overridden
		c.limit = lim
	}
}

// record counts a decided check.
func (o *ops) record(c *check) {
	if c.rule == nil {
		return
	}
	out := status.Allowed
	if c.over {
		out = status.Denied
		if c.shadow || o.s.shadow {
			out = status.ShadowDenied
		}
	}
	o.table().rule[c.rule].Record(out, c.key)
}

// storeError counts a request the store failed on.
func (o *ops) storeError(checks []check) {
	t := o.table()
	for i := range checks {
		if c := &checks[i]; c.kind == kindLimited && c.rule != nil {
			t.rule[c.rule].Record(status.StoreError, c.key)
		}
	}
}

func (o *ops) storeInfo() status.StoreInfo {
	si := status.StoreInfo{OK: true, Detail: "store in use"}
	if o.s.storeStatus != nil {
		si.OK, si.Detail = o.s.storeStatus()
	}
	if i := strings.IndexByte(si.Detail, ':'); strings.HasPrefix(si.Detail, "store ") && i > 0 {
		si.URL = strings.TrimPrefix(si.Detail[:i], "store ")
	}
	si.FailurePolicy = "error"
	if p := o.policy.Load(); p != nil {
		si.FailurePolicy = *p
	}
	return si
}

func (o *ops) enforce(id string) float64 {
	if p, ok := o.control.Load().Percent(id); ok {
		return p
	}
	if rl := o.rec.Rule(id); rl != nil && rl.Info().Shadow {
		return 0
	}
	return 100
}

func (o *ops) ruleKeys() []string {
	var out []string
	for _, rl := range o.rec.Rules() {
		out = append(out, rl.Info().ID)
	}
	return out
}

// parseDescriptor reads an identity as the RLS takes it: a descriptor,
// "[domain:] key=value, key2=value2", or a store key ("sl:…").
func parseDescriptor(s string) (domain string, entries []rules.Entry, err error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "sl:") {
		dom, kv, ok := status.Entries(s)
		if !ok {
			return "", nil, fmt.Errorf("%q is not a sluice store key", s)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			entries = append(entries, rules.Entry{Key: kv[i], Value: kv[i+1]})
		}
		return dom, entries, nil
	}
	if d, rest, ok := strings.Cut(s, ":"); ok && !strings.Contains(d, "=") {
		domain, s = strings.TrimSpace(d), rest
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		entries = append(entries, rules.Entry{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
	}
	if len(entries) == 0 {
		return "", nil, errors.New(`want a descriptor such as "domain: key=value, key2=value2"`)
	}
	return domain, entries, nil
}

// checksFor resolves one descriptor in domain (every domain when "") and
// returns its limited checks, adjusted.
func (o *ops) checksFor(ident string) ([]check, error) {
	domain, entries, err := parseDescriptor(ident)
	if err != nil {
		return nil, err
	}
	set := o.s.set.Load()
	doms := set.Domains()
	if domain != "" {
		doms = []string{domain}
	}
	var out []check
	for _, dom := range doms {
		rs, err := set.Resolve(nil, rules.Input{Domain: dom, Descriptors: []rules.Descriptor{{Entries: entries}}, Now: o.s.now})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if r.Kind != rules.Limited || r.Rule == nil {
				continue
			}
			c := check{kind: kindLimited, rule: r.Rule, shadow: r.Shadow, quotaEnd: r.QuotaEnd, key: r.Request.Key, limit: r.Request.Limit, alg: r.Request.Algorithm}
			o.adjust(&c)
			out = append(out, c)
		}
	}
	return out, nil
}

func (o *ops) lookup(ctx context.Context, ident string) ([]status.Peek, error) {
	checks, err := o.checksFor(ident)
	if err != nil {
		return nil, err
	}
	var out []status.Peek
	for i := range checks {
		c := &checks[i]
		q, w := c.limit.Normalize().Policy(c.alg)
		p := status.Peek{Rule: c.rule.Key, Key: c.key, Limit: c.limit.String(), Quota: q, Window: int64(w / time.Second), Shadow: c.shadow || o.s.shadow}
		if c.rule.Quota != nil {
			p.Limit, p.Quota = strconv.FormatInt(c.rule.Quota.Limit, 10)+"/"+c.rule.Quota.Period, c.rule.Quota.Limit
		}
		if ov, ok := o.control.Load().Override(c.rule.Key, control.Who(c.key)); ok {
			p.Override = ov.Limit.String() + " until " + ov.Until.UTC().Format(time.RFC3339)
		}
		d, err := o.s.store.Apply(ctx, ratelimit.Request{Key: c.key, Limit: c.limit, Algorithm: c.alg})
		if err != nil {
			p.Error = err.Error()
		} else {
			p.Remaining, p.ResetAfter = d.Remaining, d.ResetAfter.Seconds()
			if !c.quotaEnd.IsZero() {
				p.ResetAfter = c.quotaEnd.Sub(o.s.now()).Seconds()
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func (o *ops) targets(_ context.Context, ident, rule string) ([]control.Target, error) {
	checks, err := o.checksFor(ident)
	if err != nil {
		return nil, err
	}
	var out []control.Target
	for i := range checks {
		c := &checks[i]
		if rule != "" && c.rule.Key != rule {
			continue
		}
		out = append(out, control.Target{Rule: c.rule.Key, Key: c.key, Quota: c.rule.Quota != nil})
	}
	return out, nil
}
