package status_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/server/status"
)

// doorFixture is a Door over two domains whose rules share a name, as
// both servers build theirs.
func doorFixture(t testing.TB) (*status.Door, *control.Control, *bool) {
	t.Helper()
	var cfgs []*rules.Config
	for _, f := range []struct{ name, yaml string }{
		{"edge.yaml", `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 3}
  - key: user
    shadow_mode: true
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 5}
`},
		{"api.yaml", `
domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 30}
`},
	} {
		c, err := rules.Parse(f.name, []byte(f.yaml))
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, c)
	}
	set, err := rules.NewSet(cfgs...)
	if err != nil {
		t.Fatal(err)
	}
	rec := status.NewRecorder(status.Options{})
	var infos []status.RuleInfo
	for _, dom := range set.Domains() {
		for _, r := range set.Config(dom).Rules() {
			infos = append(infos, status.Info(r, false))
		}
	}
	rec.SetRules(infos)
	ctl := control.New(context.Background(), control.Options{})
	t.Cleanup(ctl.Close)
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	shadow := new(bool)
	d := &status.Door{Recorder: rec, Control: func() *control.Control { return ctl },
		Checks: func(_ context.Context, ip string) ([]rules.Check, error) {
			var out []rules.Check
			for _, dom := range set.Domains() {
				var err error
				out, err = set.Resolve(out, rules.Input{Domain: dom, Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "remote_address", Value: ip}}}}})
				if err != nil {
					return nil, err
				}
			}
			return out, nil
		},
		Peek:   store.Apply,
		Shadow: func() bool { return *shadow }}
	return d, ctl, shadow
}

// TestDoorRuleIDs: a rule's ID is its descriptor path, unique across
// domains; the admin API takes the ID or a name, which names every rule
// of that name.
func TestDoorRuleIDs(t *testing.T) {
	d, _, _ := doorFixture(t)
	for _, c := range []struct {
		rule string
		want []string
	}{
		{"edge.remote_address", []string{"edge.remote_address"}},
		{"per-ip", []string{"api.remote_address", "edge.remote_address"}},
		{"edge.user", []string{"edge.user"}},
		{"nope", nil},
	} {
		got := d.RuleIDs(c.rule)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("RuleIDs(%q) = %v, want %v", c.rule, got, c.want)
		}
	}
	ts, err := d.Targets(context.Background(), "10.0.0.1", "per-ip")
	if err != nil || len(ts) != 2 {
		t.Fatalf("Targets(per-ip) = %+v, %v, want both domains' rules", ts, err)
	}
	ts, err = d.Targets(context.Background(), "10.0.0.1", "api.remote_address")
	if err != nil || len(ts) != 1 || ts[0].Rule != "api.remote_address" {
		t.Errorf("Targets(api.remote_address) = %+v, %v, want that rule alone, by its ID", ts, err)
	}
}

// TestDoorEnforceAndLookup: the page's percentage and the lookup follow
// the admin API's enforcement by ID; the server-wide shadow wins.
func TestDoorEnforceAndLookup(t *testing.T) {
	d, ctl, shadow := doorFixture(t)
	ctx := context.Background()
	if got := d.Enforce("edge.user"); got != 0 {
		t.Errorf("shadow rule: Enforce = %v, want 0", got)
	}
	if got := d.Enforce("edge.remote_address"); got != 100 {
		t.Errorf("rule: Enforce = %v, want 100", got)
	}
	if err := ctl.SetEnforce(ctx, "edge.remote_address", 0); err != nil {
		t.Fatal(err)
	}
	if got := d.Enforce("edge.remote_address"); got != 0 {
		t.Errorf("enforced on 0%%: Enforce = %v, want 0", got)
	}
	peeks, err := d.Lookup(ctx, "10.0.0.1")
	if err != nil || len(peeks) != 2 {
		t.Fatalf("Lookup = %+v, %v, want 2 peeks", peeks, err)
	}
	for _, p := range peeks {
		if p.Name != "per-ip" || (p.Rule == "edge.remote_address") != p.Shadow || p.Remaining == 0 {
			t.Errorf("peek %+v: want per-ip, shadow only on edge (enforced on 0%%), nothing charged", p)
		}
	}
	lim, sh := ratelimit.Limit{Rate: 1, Period: 1e9}, false
	d.AdjustLimit(nil, "k", &lim, &sh) // an override check: nothing to do
	*shadow = true
	if err := ctl.SetEnforce(ctx, "api.remote_address", 100); err != nil {
		t.Fatal(err)
	}
	if got := d.Enforce("api.remote_address"); got != 0 {
		t.Errorf("server-wide shadow: Enforce = %v, want 0", got)
	}
	if peeks, _ := d.Lookup(ctx, "10.0.0.1"); len(peeks) != 2 || !peeks[0].Shadow || !peeks[1].Shadow {
		t.Errorf("server-wide shadow: lookup %+v, want every peek shadow", peeks)
	}
}

// BenchmarkDoorAdjustLimit is the servers' per-check hot path: with no
// admin setting, and with a percentage on the rule.
func BenchmarkDoorAdjustLimit(b *testing.B) {
	d, ctl, _ := doorFixture(b)
	set, err := rules.Parse("b.yaml", []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 3}\n"))
	if err != nil {
		b.Fatal(err)
	}
	r := set.Rules()[0]
	for _, name := range []string{"none", "percent"} {
		if name == "percent" {
			if err := ctl.SetEnforce(context.Background(), status.RuleID(r), 50); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lim, shadow := r.Limit, false
					d.AdjustLimit(r, "sl:token_bucket:3600000ms:edge_remote%5Faddress_10.0.0.1_", &lim, &shadow)
				}
			})
		})
	}
}
