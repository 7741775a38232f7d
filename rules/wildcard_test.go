package rules

import (
	"fmt"
	"strings"
	"testing"
)

// refGlob is the reference: the textbook dynamic programme over pattern
// and string prefixes, in which '*' matches any run of bytes (the empty one
// included) and every other byte itself. m[j] reports whether the pattern
// read so far matches s[:j].
func refGlob(pattern, s string) bool {
	m := make([]bool, len(s)+1)
	m[0] = true
	for i := 0; i < len(pattern); i++ {
		next := make([]bool, len(s)+1)
		for j := 0; j <= len(s); j++ {
			if pattern[i] == '*' {
				next[j] = m[j] || (j > 0 && next[j-1])
			} else {
				next[j] = j > 0 && m[j-1] && s[j-1] == pattern[i]
			}
		}
		m = next
	}
	return m[len(s)]
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"bar*b", "barab", true},
		{"bar*b", "barb", true},
		{"bar*b", "bab", false},
		{"bar*b", "bara", false},
		{"foo*bar*baz", "foo123bar456baz", true},
		{"foo*bar*baz", "foobarbaz", true},
		{"foo*bar*baz", "foo123baz", false},
		{"foo*bar*baz", "foobazbar", false},
		{"*", "", true},
		{"*x", "x", true},
		{"x*", "", false},
		{"a*a", "a", false},
		{"a*a*a", "aaa", true},
		{"a*a*a", "aa", false},
		{"**", "q", true},
		{"", "", true},
	}
	for _, tt := range tests {
		if got := globMatch(strings.Split(tt.pattern, "*"), tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
		if got := refGlob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("refGlob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// FuzzWildcard checks that a one-descriptor config with the fuzzed value
// matches an entry exactly when the reference glob matches its key_value
// (exact equality, which upstream tries first, is a glob match too) or the
// descriptor's composite key is the entry's key (the key-only pass), and
// that Match, MetricKey and AppendKey never panic.
func FuzzWildcard(f *testing.F) {
	for _, s := range [][3]string{
		{"k", "bar*b", "barab"}, {"k", "foo*bar*baz", "foobarbaz"}, {"k", "*suffix", "xsuffix"},
		{"k", "*", ""}, {"k", "a**", "a"}, {"k_x", "*", "y"}, {"k", "b*", "x"}, {"k", "a*a", "a"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, key, value, reqValue string) {
		if key == "" || value == "" || strings.ContainsAny(key+value, "\x00\n\r\t\\\"'") || !isPlain(key+value) {
			return
		}
		src := fmt.Sprintf("domain: d\ndescriptors:\n  - key: %q\n    value: %q\n    rate_limit: {unit: second, requests_per_unit: 1}\n", key, value)
		c, err := Parse("fuzz.yaml", []byte(src))
		if err != nil {
			return // e.g. a value that is not valid UTF-8
		}
		for _, ent := range []Entry{{key, reqValue}, {key + "_" + reqValue, ""}, {"x", reqValue}} {
			got := c.Match([]Entry{ent}) != nil
			// The exact and wildcard passes compare key_value; the last,
			// key-only pass compares the entry's key alone.
			want := refGlob(key+"_"+value, ent.Key+"_"+ent.Value) || key+"_"+value == ent.Key
			if got != want {
				t.Fatalf("pattern %q, entry %+v: Match = %v, reference glob = %v", key+"_"+value, ent, got, want)
			}
			if got {
				r := c.Match([]Entry{ent})
				_ = r.MetricKey([]Entry{ent})
				_ = r.AppendKey(nil, []Entry{ent})
			}
		}
	})
}

// isPlain keeps the fuzzed key and value to printable ASCII, which YAML's
// double-quoted form (%q) spells the same way.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// TestCompositeKeys: upstream compares key_value composite keys, so keys
// with '_' reach descriptors of other keys, and two descriptors with one
// composite key are a duplicate.
func TestCompositeKeys(t *testing.T) {
	t.Parallel()
	c, err := Parse("c.yaml", []byte(`
domain: d
descriptors:
  - key: a
    value: b_c
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: x_y
    rate_limit: {unit: second, requests_per_unit: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		entries []Entry
		want    string
		metric  string
	}{
		{e("a", "b_c"), "d.a_b_c", "d.a_b_c"},
		{e("a_b", "c"), "d.a_b_c", "d.a_b_c"},
		{e("x_y", "anything"), "d.x_y", "d.x_y"},
		{e("x", "y"), "d.x_y", "d.x_y"},
		{e("a", "b"), "", ""},
	} {
		r := c.Match(tt.entries)
		got, metric := "", ""
		if r != nil {
			got, metric = r.Key, r.MetricKey(tt.entries)
		}
		if got != tt.want || metric != tt.metric {
			t.Errorf("Match(%v) = %q (metric %q), want %q (%q)", tt.entries, got, metric, tt.want, tt.metric)
		}
	}
	_, err = Parse("dup.yaml", []byte(`
domain: d
descriptors:
  - key: a
    value: b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a_b
    rate_limit: {unit: second, requests_per_unit: 2}
`))
	if err == nil || !strings.Contains(err.Error(), `duplicate descriptor composite key "d.a_b"`) {
		t.Errorf("a/b and a_b: err = %v, want a duplicate composite key", err)
	}
}

// TestWildcardKeys follows upstream's metric keys for mid-value wildcards
// with share_threshold, value_to_metric and detailed_metric, and checks
// that share_threshold makes every matching value share one store key.
func TestWildcardKeys(t *testing.T) {
	t.Parallel()
	c, err := Parse("k.yaml", []byte(`
domain: d
descriptors:
  - key: path
    value: /api/*/items/*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: v2m
    value: a*z
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: det
    value: a*z
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: svc
    value: s*c
    share_threshold: true
    descriptors:
      - key: user
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: k*
    rate_limit: {unit: second, requests_per_unit: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		entries []Entry
		metric  string
	}{
		{e("path", "/api/v1/items/7"), "d.path_/api/*/items/*"},
		{e("v2m", "abcz"), "d.v2m_abcz"},
		{e("det", "abcz"), "d.det_abcz"},
		{e("svc", "s1c", "user", "u"), "d.svc_s*c.user_u"},
		{e("kilo", "v"), "d.kilo_k*"},
	} {
		r := c.Match(tt.entries)
		if r == nil {
			t.Fatalf("Match(%v) = nil", tt.entries)
		}
		if got := r.MetricKey(tt.entries); got != tt.metric {
			t.Errorf("MetricKey(%v) = %q, want %q", tt.entries, got, tt.metric)
		}
	}
	a, b := e("path", "/api/v1/items/7"), e("path", "/api/v2/items/8")
	if ka, kb := string(c.Match(a).AppendKey(nil, a)), string(c.Match(b).AppendKey(nil, b)); ka != kb {
		t.Errorf("share_threshold keys differ: %q and %q", ka, kb)
	}
	x, y := e("det", "abz"), e("det", "acz")
	if kx, ky := string(c.Match(x).AppendKey(nil, x)), string(c.Match(y).AppendKey(nil, y)); kx == ky {
		t.Errorf("values of a wildcard without share_threshold share the key %q", kx)
	}
}

func TestMatchAllocsMidWildcard(t *testing.T) {
	c := mustParse(t, "wildcard.yaml")
	for _, entries := range [][]Entry{e("multiWild", "foo123bar456baz"), e("order", "ac"), e("nestedWild", "val1", "wild", "goo2"), e("any", "")} {
		if n := testing.AllocsPerRun(100, func() { c.Match(entries) }); n != 0 {
			t.Errorf("Match(%v) allocs = %v, want 0", entries, n)
		}
	}
}

// TestShareThresholdScenarios follows upstream's share_threshold scenarios
// (test/config/share_threshold.yaml there): the metric key keeps the
// pattern of every level matched by a share_threshold wildcard, which beats
// value_to_metric and detailed_metric, and values matching those patterns
// share one store key; an exact descriptor beside the wildcard keeps its
// own.
func TestShareThresholdScenarios(t *testing.T) {
	t.Parallel()
	c, err := Parse("s.yaml", []byte(`
domain: s
descriptors:
  - key: outer
    value: top/*
    share_threshold: true
    descriptors:
      - key: outer
        value: in/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: p
    value: p/*
    share_threshold: true
    descriptors:
      - key: f
        value: f/*
        descriptors:
          - key: t
            rate_limit: {unit: minute, requests_per_unit: 4}
  - key: doc
    value: d1
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: doc
    value: d*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: mid
    value: /api*v2
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: tenant
    value: t*prod
    share_threshold: true
    descriptors:
      - key: res
        value: r*v2
        share_threshold: true
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		a, b   []Entry // two requests that share a counter, or not
		metric string  // a's metric key
		shared bool
	}{
		{e("outer", "top/1", "outer", "in/1"), e("outer", "top/2", "outer", "in/2"), "s.outer_top/*.outer_in/*", true},
		{e("p", "p/x", "f", "f/1", "t", "pdf"), e("p", "p/y", "f", "f/1", "t", "pdf"), "s.p_p/*.f_f/*.t", true},
		{e("p", "p/x", "f", "f/1", "t", "pdf"), e("p", "p/x", "f", "f/2", "t", "pdf"), "s.p_p/*.f_f/*.t", false},
		{e("doc", "d2"), e("doc", "d3"), "s.doc_d*", true},
		{e("doc", "d1"), e("doc", "d2"), "s.doc_d1", false},
		{e("mid", "/api/v2"), e("mid", "/api-beta-v2"), "s.mid_/api*v2", true},
		{e("tenant", "t1prod", "res", "rXv2"), e("tenant", "t2prod", "res", "rYv2"), "s.tenant_t*prod.res_r*v2", true},
		{e("under_x", "y"), e("under_x", "y"), "", true}, // no match
	} {
		ra, rb := c.Match(tt.a), c.Match(tt.b)
		if tt.metric == "" {
			if ra != nil {
				t.Errorf("Match(%v) = %v, want nil", tt.a, ra)
			}
			continue
		}
		if ra == nil || rb == nil {
			t.Fatalf("Match(%v) = %v, Match(%v) = %v", tt.a, ra, tt.b, rb)
		}
		if got := ra.MetricKey(tt.a); got != tt.metric {
			t.Errorf("MetricKey(%v) = %q, want %q", tt.a, got, tt.metric)
		}
		ka, kb := string(ra.AppendKey(nil, tt.a)), string(rb.AppendKey(nil, tt.b))
		if (ka == kb) != tt.shared {
			t.Errorf("%v and %v: keys %q and %q, shared want %v", tt.a, tt.b, ka, kb, tt.shared)
		}
	}
	w := mustParse(t, "wildcard.yaml")
	if r, en := w.Match(e("under_x", "y")), e("under_x", "y"); r == nil || r.MetricKey(en) != "wildcard.under_x_under_*" {
		t.Errorf("a wildcard of another key: metric key %q, want upstream's %q", r.MetricKey(en), "wildcard.under_x_under_*")
	}
}
