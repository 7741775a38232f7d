package rls

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/server/status"
)

// ops is the RLS's status page (/status, /status.json) and admin API
// (/admin/..., with SetAdmin) on its HTTP listener. It records each
// limited descriptor's outcome per rule: a minute ring and the top-K
// denied and shadow-denied keys (server/status). A descriptor's
// identity is its store key, the descriptor's values; rules are named by
// status.RuleID.
type ops struct {
	s       *Server
	policy  atomic.Pointer[string] // the failure policy's name (SetFailurePolicy)
	rec     *status.Recorder
	door    *status.Door
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
	o.door = &status.Door{Recorder: o.rec, Control: o.control.Load, Checks: o.checksFor, Now: s.now,
		Peek: func(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
			return s.store.Apply(ctx, req)
		},
		Shadow: func() bool { return s.shadow }}
	o.page = &status.Server{Name: "rls", Recorder: o.rec, Logger: s.log, Lookup: o.door.Lookup, Enforce: o.door.Enforce,
		Store: o.storeInfo}
	return o
}

func (o *ops) close() {
	o.control.Load().Close()
}

// SetAdmin turns the admin API on: token is its bearer token ("" keeps it
// refused; see control.LoadToken), resetter forgets keys (the store, when
// it is a ratelimit.Resetter; the local over-limit cache forgets them
// too), and settings, when not nil (a Redis
// store), shares overrides and percentages with every process on it.
// Call it before serving.
func (s *Server) SetAdmin(token string, resetter ratelimit.Resetter, settings control.Settings, actions *prometheus.CounterVec) {
	o := s.ops
	if resetter != nil && s.lc != nil {
		resetter = lcResetter{resetter, s.lc}
	}
	if settings != nil {
		old := o.control.Load()
		o.control.Store(control.New(context.Background(), control.Options{Settings: settings, Logger: s.log, Now: s.now}))
		old.Close()
	}
	o.api.Store(&control.API{Control: o.control.Load(), Token: func() string { return token }, Targets: o.door.Targets,
		Rules: o.door.RuleIDs, Resetter: resetter, Logger: s.log, Actions: actions, Events: s.events})
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
			infos = append(infos, status.Info(r, o.s.shadow))
			rs = append(rs, r)
		}
	}
	o.rec.SetRules(infos)
	t := &ruleTable{set: set, rule: make(map[*rules.Rule]*status.Rule, len(rs))}
	for _, r := range rs {
		t.rule[r] = o.rec.Rule(status.RuleID(r))
	}
	o.byRule.Store(t)
	return t
}

// adjust applies the admin API's override and percentage enforcement to a
// limited check.
func (o *ops) adjust(c *check) {
	o.door.AdjustLimit(c.Rule, c.Request.Key, &c.Request.Limit, &c.Shadow)
}

// record counts a decided check.
func (o *ops) record(c *check) {
	if c.Rule == nil {
		return
	}
	out := status.Allowed
	if c.over {
		out = status.Denied
		if c.Shadow || o.s.shadow {
			out = status.ShadowDenied
		}
	}
	o.table().rule[c.Rule].Record(out, c.Request.Key)
}

// storeError counts a request the store failed on.
func (o *ops) storeError(checks []check) {
	t := o.table()
	for i := range checks {
		if c := &checks[i]; c.Kind == kindLimited && c.Rule != nil {
			t.rule[c.Rule].Record(status.StoreError, c.Request.Key)
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

// checksFor resolves one descriptor in domain (every domain when "")
// into checks; status.Door keeps the limited ones and adjusts them.
func (o *ops) checksFor(_ context.Context, ident string) ([]rules.Check, error) {
	domain, entries, err := parseDescriptor(ident)
	if err != nil {
		return nil, err
	}
	set := o.s.set.Load()
	doms := set.Domains()
	if domain != "" {
		doms = []string{domain}
	}
	var out []rules.Check
	for _, dom := range doms {
		out, err = set.Resolve(out, rules.Input{Domain: dom, Descriptors: []rules.Descriptor{{Entries: entries}}, Now: o.s.now})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
