package status

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// RuleID is a rule's ID on the status page (RuleInfo.ID, Peek.Rule) and
// in the admin API (control.Target.Rule, the enforcements): its Key, the
// descriptor path "domain.key_value.key2", which is unique across a rule
// set's domains. A rule's name (rate_limit.name, which several rules may
// share) is accepted by the admin API too, for every rule of that name
// (Door.RuleIDs).
func RuleID(r *rules.Rule) string { return r.Key }

// Info describes rule r for the page; shadow is the server-wide shadow.
func Info(r *rules.Rule, shadow bool) RuleInfo {
	in := RuleInfo{ID: RuleID(r), Name: r.Name, Domain: r.Domain, Shadow: r.ShadowMode || shadow}
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

// Door is one server's rules as its status page and admin API see them:
// the lookup box, the admin API's targets and rule IDs, and the admin
// API's overrides and percentages applied to a check. Both servers use
// it; they differ only in how an identity becomes checks (Checks) and in
// their store (Peek). Its fields are read on each call.
type Door struct {
	Recorder *Recorder
	// Control returns the admin API's overrides and percentages in use.
	Control func() *control.Control
	// Checks returns the checks a request of identity (as the server's
	// lookup box takes it) would make, resolved but not adjusted.
	Checks func(ctx context.Context, identity string) ([]rules.Check, error)
	// Peek reads a store request's state without charging it (N is 0).
	Peek func(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error)
	// Shadow reports the server-wide shadow, which wins over the admin
	// API's percentages; nil is false.
	Shadow func() bool
	// Now is the clock of quota ends; nil is time.Now.
	Now func() time.Time
}

func (d *Door) shadow() bool { return d.Shadow != nil && d.Shadow() }

func (d *Door) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// AdjustLimit applies the admin API's override and percentage enforcement
// to a limited check of rule r on key: a calendar quota's window is never
// overridden. It is the servers' hot path: no allocation, and nothing but
// a load when the admin API has set nothing.
func (d *Door) AdjustLimit(r *rules.Rule, key string, limit *ratelimit.Limit, shadow *bool) {
	if r == nil {
		return
	}
	lim := *limit
	d.Control().Adjust(RuleID(r), key, &lim, shadow)
	if r.Quota == nil {
		*limit = lim
	}
}

// Adjust is AdjustLimit for a rules.Check, with the server-wide shadow.
func (d *Door) Adjust(c *rules.Check) {
	d.AdjustLimit(c.Rule, c.Request.Key, &c.Request.Limit, &c.Shadow)
	c.Shadow = c.Shadow || d.shadow()
}

// Enforce is the page's enforcement percentage of rule id: 0 under the
// server-wide shadow, else the admin API's percentage, else 0 for a
// shadow rule and 100 for the others.
func (d *Door) Enforce(id string) float64 {
	if d.shadow() {
		return 0
	}
	if p, ok := d.Control().Percent(id); ok {
		return p
	}
	if rl := d.Recorder.Rule(id); rl != nil && rl.Info().Shadow {
		return 0
	}
	return 100
}

// RuleIDs returns the IDs of the page's rules that rule names: the rule
// whose ID it is, or every rule of that name.
func (d *Door) RuleIDs(rule string) []string {
	var out []string
	for _, rl := range d.Recorder.Rules() {
		if in := rl.Info(); in.ID == rule || in.Name == rule {
			out = append(out, in.ID)
		}
	}
	return out
}

// checks returns identity's limited checks, each key once, adjusted.
func (d *Door) checks(ctx context.Context, identity string) ([]rules.Check, error) {
	all, err := d.Checks(ctx, identity)
	if err != nil {
		return nil, err
	}
	return d.Limited(all), nil
}

// Limited returns the limited checks of all, each key once, adjusted
// (Adjust): what a lookup peeks.
func (d *Door) Limited(all []rules.Check) []rules.Check {
	seen := map[string]bool{}
	var out []rules.Check
	for i := range all {
		c := &all[i]
		if c.Kind != rules.Limited || seen[c.Request.Key] {
			continue
		}
		seen[c.Request.Key] = true
		d.Adjust(c)
		out = append(out, *c)
	}
	return out
}

// PeekCheck reads c's state without charging it; a calendar quota's
// ResetAfter is the time to its end.
func (d *Door) PeekCheck(ctx context.Context, c *rules.Check) (ratelimit.Decision, error) {
	req := c.Request
	req.N = 0
	dec, err := d.Peek(ctx, req)
	if err == nil && !c.QuotaEnd.IsZero() {
		dec.ResetAfter = c.QuotaEnd.Sub(d.now())
	}
	return dec, err
}

// Lookup is the page's lookup box: identity on every rule, peeked.
func (d *Door) Lookup(ctx context.Context, identity string) ([]Peek, error) {
	checks, err := d.checks(ctx, identity)
	if err != nil {
		return nil, err
	}
	out := make([]Peek, 0, len(checks))
	for i := range checks {
		c := &checks[i]
		q, w := c.Quota()
		p := Peek{Rule: c.Policy(), Name: c.Policy(), Key: c.Request.Key, Limit: c.Request.Limit.String(), Quota: q,
			Window: int64(w / time.Second), Shadow: c.Shadow}
		if c.Rule != nil {
			p.Rule = RuleID(c.Rule)
			if c.Rule.Quota != nil {
				p.Limit = strconv.FormatInt(c.Rule.Quota.Limit, 10) + "/" + c.Rule.Quota.Period
			}
			if ov, ok := d.Control().Override(RuleID(c.Rule), control.Who(c.Request.Key)); ok {
				p.Override = ov.Limit.String() + " until " + ov.Until.UTC().Format(time.RFC3339)
			}
		}
		if dec, err := d.PeekCheck(ctx, c); err != nil {
			p.Error = err.Error()
		} else {
			p.Remaining, p.ResetAfter = dec.Remaining, dec.ResetAfter.Seconds()
		}
		out = append(out, p)
	}
	return out, nil
}

// Targets are the admin API's keys for identity on rule (an ID or a
// name; "" every rule).
func (d *Door) Targets(ctx context.Context, identity, rule string) ([]control.Target, error) {
	checks, err := d.checks(ctx, identity)
	if err != nil {
		return nil, err
	}
	var out []control.Target
	for i := range checks {
		c := &checks[i]
		if c.Rule == nil || (rule != "" && RuleID(c.Rule) != rule && c.Rule.Name != rule) {
			continue
		}
		out = append(out, control.Target{Rule: RuleID(c.Rule), Key: c.Request.Key, Quota: c.Rule.Quota != nil})
	}
	return out, nil
}
