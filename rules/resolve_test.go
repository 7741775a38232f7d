package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func TestAppendKey(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "wildcard.yaml")
	tests := []struct {
		entries []Entry
		want    string
	}{
		{e("wild", "foo1"), "sl:fixed_window:60000ms:wildcard_wild_foo1_"},
		// share_threshold: every value of the wildcard shares the pattern's state.
		{e("shared", "files/a"), "sl:fixed_window:60000ms:wildcard_shared_files/*_"},
		{e("shared", "files/b"), "sl:fixed_window:60000ms:wildcard_shared_files/*_"},
		// '_' and '%' are escaped, so a value cannot spell more entries.
		{e("wild", "foo_noWild_foo"), "sl:fixed_window:60000ms:wildcard_wild_foo%5FnoWild%5Ffoo_"},
		{e("wild", "foo%5F"), "sl:fixed_window:60000ms:wildcard_wild_foo%255F_"},
	}
	for _, tt := range tests {
		got := string(c.Match(tt.entries).AppendKey(nil, tt.entries))
		if got != tt.want {
			t.Errorf("AppendKey(%v) = %q, want %q", tt.entries, got, tt.want)
		}
	}
}

// TestAppendKeyInjective: distinct (domain, entries) never share a key, so
// no request value can reach another identity's state.
func TestAppendKeyInjective(t *testing.T) {
	t.Parallel()
	parts := []string{"", "a", "_", "a_", "_a", "%", "%5F", "a_b", "b"}
	seen := map[string]string{}
	for _, dom := range parts[1:] {
		for _, k1 := range parts {
			for _, v1 := range parts {
				for _, two := range []bool{false, true} {
					es := []Entry{{k1, v1}}
					if two {
						es = append(es, Entry{"b", "a"})
					}
					k := string(appendKey(nil, ratelimit.GCRA, time.Second, time.Time{}, "", nil, dom, es))
					id := dom + "|" + entriesString(es)
					if prev, ok := seen[k]; ok && prev != id {
						t.Fatalf("%s and %s share the key %q", prev, id, k)
					}
					seen[k] = id
				}
			}
		}
	}
}

func entriesString(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("(" + e.Key + "=" + e.Value + ")")
	}
	return b.String()
}

func parseSet(t testing.TB, files ...string) *Set {
	t.Helper()
	var cfgs []*Config
	for i, f := range files {
		c, err := Parse("f"+string(rune('0'+i))+".yaml", []byte(f))
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, c)
	}
	s, err := NewSet(cfgs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const resolveYAML = `
domain: d
descriptors:
  - key: a
    value: x
    rate_limit: {name: limited, unit: minute, requests_per_unit: 3}
  - key: b
    rate_limit: {unlimited: true, replaces: [{name: limited}]}
  - key: c
    rate_limit: {name: c1, unit: second, requests_per_unit: 5, algorithm: gcra, burst: 2}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q
    quota: {period: month, limit: 100}
  - key: r1
    rate_limit: {name: r1, unit: minute, requests_per_unit: 1, replaces: [{name: r2}]}
  - key: r2
    rate_limit: {name: r2, unit: minute, requests_per_unit: 1, replaces: [{name: r1}]}
`

func TestResolve(t *testing.T) {
	t.Parallel()
	set := parseSet(t, resolveYAML)
	now := time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC)
	d := func(kv ...string) Descriptor { return Descriptor{Entries: e(kv...), Hits: 1} }
	resolve := func(in Input) []Check {
		t.Helper()
		in.Now = func() time.Time { return now }
		if in.Domain == "" {
			in.Domain = "d"
		}
		cs, err := set.Resolve(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != len(in.Descriptors) {
			t.Fatalf("%d checks for %d descriptors", len(cs), len(in.Descriptors))
		}
		return cs
	}

	// An unlimited rule that replaces a limited one removes it, as in
	// envoyproxy/ratelimit's constructLimitsToCheck.
	cs := resolve(Input{Descriptors: []Descriptor{d("a", "x"), d("b", "1")}})
	if cs[0].Kind != NoLimit || cs[1].Kind != Unlimited {
		t.Errorf("limited + unlimited replacing it = %v, %v; want none, unlimited", cs[0].Kind, cs[1].Kind)
	}
	cs = resolve(Input{Descriptors: []Descriptor{d("a", "x")}})
	if c := cs[0]; c.Kind != Limited || c.Request.Key != "sl:fixed_window:60000ms:d_a_x_" || c.Request.N != 1 ||
		c.Request.Limit != (ratelimit.Limit{Rate: 3, Period: time.Minute}) || c.Request.Algorithm != ratelimit.FixedWindow || !c.Enforced() {
		t.Errorf("a=x: %+v", c)
	}
	// Two rules replacing each other both go.
	cs = resolve(Input{Descriptors: []Descriptor{d("r1", "1"), d("r2", "1")}})
	if cs[0].Kind != NoLimit || cs[1].Kind != NoLimit {
		t.Errorf("r1, r2 = %v, %v; want none, none", cs[0].Kind, cs[1].Kind)
	}
	// Shadow: the rule's, or the input's.
	cs = resolve(Input{Descriptors: []Descriptor{d("s", "1"), d("c", "1")}})
	if !cs[0].Shadow || cs[1].Shadow || cs[0].Enforced() || !cs[1].Enforced() {
		t.Errorf("shadow: %+v", cs)
	}
	cs = resolve(Input{Descriptors: []Descriptor{d("c", "1")}, Shadow: true})
	if !cs[0].Shadow {
		t.Error("Input.Shadow does not shadow")
	}
	// A disabled rule does not apply and replaces nothing.
	cs = resolve(Input{Descriptors: []Descriptor{d("a", "x"), d("b", "1")}, Disabled: map[string]bool{"d.b": true}})
	if cs[0].Kind != Limited || cs[1].Kind != NoLimit {
		t.Errorf("disabled replacer: %v, %v", cs[0].Kind, cs[1].Kind)
	}
	// A calendar quota: one window over the month, keyed by the month.
	cs = resolve(Input{Descriptors: []Descriptor{d("q", "v")}})
	if c := cs[0]; c.Kind != Limited || c.Request.Key != "sl:quota:2026-11:d_q_v_" ||
		!c.QuotaEnd.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || c.Request.Algorithm != ratelimit.FixedWindow || c.Request.Limit.Rate != 100 {
		t.Errorf("quota: %+v", c)
	}
	// An override: a fixed window, no rule, keyed like a rule would be.
	lim := ratelimit.Limit{Rate: 7, Period: time.Hour}
	cs = resolve(Input{Descriptors: []Descriptor{{Entries: e("zz", "1"), Hits: 0, Override: &lim}}})
	if c := cs[0]; c.Kind != Limited || c.Rule != nil || c.Request.Key != "sl:fixed_window:3600000ms:d_zz_1_" || c.Request.N != 0 || c.Policy() != "override" {
		t.Errorf("override: %+v", c)
	}
	// An unknown domain limits nothing, overrides included.
	cs = resolve(Input{Domain: "other", Descriptors: []Descriptor{d("a", "x"), {Entries: e("zz", "1"), Override: &lim}}})
	if cs[0].Kind != NoLimit || cs[1].Kind != NoLimit {
		t.Errorf("unknown domain: %v, %v", cs[0].Kind, cs[1].Kind)
	}
}

func TestResolveAllocs(t *testing.T) {
	set := parseSet(t, resolveYAML)
	in := Input{Domain: "d", Descriptors: []Descriptor{{Entries: e("c", "1"), Hits: 1}}}
	dst := make([]Check, 0, 4)
	if n := testing.AllocsPerRun(100, func() { dst, _ = set.Resolve(dst[:0], in) }); n != 1 {
		t.Errorf("Resolve of one descriptor: %v allocations, want 1 (the key)", n)
	}
}

func BenchmarkResolve(b *testing.B) {
	set := parseSet(b, resolveYAML)
	in := Input{Domain: "d", Descriptors: []Descriptor{{Entries: e("c", "1.2.3.4"), Hits: 1}, {Entries: e("a", "x"), Hits: 1}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]Check, 0, 4)
		for pb.Next() {
			dst, _ = set.Resolve(dst[:0], in)
		}
	})
}
