package rules

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func mustParse(t testing.TB, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "good", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(name, data)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", name, err)
	}
	return c
}

func e(kv ...string) []Entry {
	var out []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

func TestMatchBasic(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "basic_config.yaml")
	tests := []struct {
		name    string
		entries []Entry
		want    string // Rule.Key, "" for no rule
		limit   ratelimit.Limit
	}{
		{"empty", nil, "", ratelimit.Limit{}},
		{"unknown key", e("nope", "x"), "", ratelimit.Limit{}},
		{"placeholder without limit", e("key1", "value1"), "", ratelimit.Limit{}},
		{"key-only under value", e("key1", "value1", "subkey1", "something"), "test-domain.key1_value1.subkey1", ratelimit.Limit{Rate: 5, Period: time.Second}},
		{"value beats key-only", e("key1", "value1", "subkey1", "subvalue1"), "test-domain.key1_value1.subkey1_subvalue1", ratelimit.Limit{Rate: 10, Period: time.Second}},
		{"unknown first value", e("key1", "other", "subkey1", "subvalue1"), "", ratelimit.Limit{}},
		{"key-only", e("key2", "something"), "test-domain.key2", ratelimit.Limit{Rate: 20, Period: time.Minute}},
		{"specific value", e("key2", "value2"), "test-domain.key2_value2", ratelimit.Limit{Rate: 30, Period: time.Minute}},
		{"specific value without limit hides key-only", e("key2", "value3"), "", ratelimit.Limit{}},
		{"too deep", e("key2", "value2", "subkey", "subvalue"), "", ratelimit.Limit{}},
		{"hour", e("key3", "foo"), "test-domain.key3", ratelimit.Limit{Rate: 1, Period: time.Hour}},
		{"day", e("key4", "foo"), "test-domain.key4", ratelimit.Limit{Rate: 1, Period: 24 * time.Hour}},
		{"inner rule with children", e("key5", "value5"), "test-domain.key5_value5", ratelimit.Limit{Rate: 5, Period: time.Second}},
		{"child of inner rule", e("key5", "value5", "subkey5", "subvalue5"), "test-domain.key5_value5.subkey5_subvalue5", ratelimit.Limit{Rate: 50, Period: time.Second}},
		{"partial under inner rule", e("key5", "value5", "subkey5", "other"), "", ratelimit.Limit{}},
		{"unlimited", e("key6", "x"), "test-domain.key6", ratelimit.Limit{}},
		{"zero rate, case-insensitive unit", e("key7", "value7"), "test-domain.key7_value7", ratelimit.Limit{Rate: 0, Period: time.Minute}},
		{"upper-case unit", e("key8", "x"), "test-domain.key8", ratelimit.Limit{Rate: 100, Period: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := c.Match(tt.entries)
			got := ""
			if r != nil {
				got = r.Key
			}
			if got != tt.want {
				t.Fatalf("Match(%v) = %q, want %q", tt.entries, got, tt.want)
			}
			if r != nil && r.Limit != tt.limit {
				t.Errorf("Match(%v).Limit = %v, want %v", tt.entries, r.Limit, tt.limit)
			}
			if r != nil && !r.Unlimited && r.Algorithm != ratelimit.FixedWindow {
				t.Errorf("Match(%v).Algorithm = %v, want fixed_window", tt.entries, r.Algorithm)
			}
		})
	}
}

func TestRuleFields(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "basic_config.yaml")
	r7 := c.Match(e("key7", "value7"))
	if got, want := r7.Name, "seven"; got != want || !r7.HasName() {
		t.Errorf("Name = %q (HasName %v), want %q", got, r7.HasName(), want)
	}
	if !r7.ShadowMode || !r7.DetailedMetric {
		t.Errorf("ShadowMode, DetailedMetric = %v, %v, want true, true", r7.ShadowMode, r7.DetailedMetric)
	}
	if r7.Line != 59 || r7.File != "basic_config.yaml" {
		t.Errorf("File:Line = %s:%d, want basic_config.yaml:59", r7.File, r7.Line)
	}
	r8 := c.Match(e("key8", "x"))
	if len(r8.Replaces) != 1 || r8.Replaces[0] != "seven" {
		t.Errorf("Replaces = %q, want [seven]", r8.Replaces)
	}
	if r8.Name != r8.Key || r8.HasName() {
		t.Errorf("derived Name = %q (HasName %v), want %q", r8.Name, r8.HasName(), r8.Key)
	}
	if !c.Match(e("key6", "x")).Unlimited {
		t.Errorf("key6 not Unlimited")
	}
	if got := len(c.Rules()); got != 11 {
		t.Errorf("len(Rules()) = %d, want 11", got)
	}
}

func TestMatchWildcard(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "wildcard.yaml")
	tests := []struct {
		entries []Entry
		want    string
	}{
		{e("wild", "foo"), "wildcard.wild_foo*"},
		{e("wild", "foo1"), "wildcard.wild_foo*"},
		{e("wild", "foobar"), "wildcard.wild_foobar"}, // exact beats wildcard
		{e("wild", "fo"), ""},
		{e("noWild", "foo1"), ""},
		{e("noWild", "foo"), "wildcard.noWild_foo"},
		{e("noVal", "anything"), "wildcard.noVal"},
		{e("wild", "bar"), ""},
		// '*' anywhere in a value, as envoyproxy/ratelimit's master.
		{e("midWild", "barab"), "wildcard.midWild_bar*b"},
		{e("midWild", "bar123b"), "wildcard.midWild_bar*b"},
		{e("midWild", "barb"), "wildcard.midWild_bar*b"}, // '*' matches the empty run
		{e("midWild", "bar*b"), "wildcard.midWild_bar*b"},
		{e("midWild", "bara"), ""},
		{e("midWild", "xbarb"), ""},
		{e("midWild", "bab"), ""}, // prefix and suffix do not overlap
		{e("multiWild", "foo123bar456baz"), "wildcard.multiWild_foo*bar*baz"},
		{e("multiWild", "foobarbaz"), "wildcard.multiWild_foo*bar*baz"},
		{e("multiWild", "foobarbarbaz"), "wildcard.multiWild_foo*bar*baz"},
		{e("multiWild", "foo123baz"), ""},
		{e("multiWild", "bar456baz"), ""},
		{e("multiWild", "foobazbar"), ""},
		{e("nestedWild", "val1", "wild", "goo2"), "wildcard.nestedWild_val1.wild_goo*"},
		{e("nestedWild", "val1", "wild", "foo2"), ""},
		{e("order", "ab"), "wildcard.order_*b"},
		{e("order", "b"), "wildcard.order_*b"},
		{e("order", "ac"), "wildcard.order_a*"},
		{e("order", "c"), ""},
		{e("suffix", "api.example.com"), "wildcard.suffix_*.example.com"},
		{e("suffix", ".example.com"), "wildcard.suffix_*.example.com"},
		{e("suffix", "example.com"), ""},
		{e("any", "x"), "wildcard.any_*"},
		{e("any", ""), "wildcard.any_*"},
		{e("stars", "az"), "wildcard.stars_a**z"},
		{e("stars", "a-z"), "wildcard.stars_a**z"},
		{e("under", "y"), "wildcard.under_*"},
		{e("under_x", "y"), "wildcard.under_*"},
		{e("shared", "files/a"), "wildcard.shared_files/*"},
	}
	for _, tt := range tests {
		r := c.Match(tt.entries)
		got := ""
		if r != nil {
			got = r.Key
		}
		if got != tt.want {
			t.Errorf("Match(%v) = %q, want %q", tt.entries, got, tt.want)
		}
	}
}

func TestMetricKey(t *testing.T) {
	t.Parallel()
	c, err := Parse("metrics.yaml", []byte(`
domain: d
descriptors:
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: route
    value: api/*
    descriptors:
      - key: method
        value_to_metric: true
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: svc
    value: svc/*
    share_threshold: true
    descriptors:
      - key: user
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: wild
    value: w*
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		entries []Entry
		want    string
	}{
		{e("plain", "x"), "d.plain"},
		{e("detailed", "x"), "d.detailed_x"},
		{e("detailed", ""), "d.detailed_"},
		{e("route", "api/v1", "method", "GET"), "d.route_api/*.method_GET"},
		{e("svc", "svc/a", "user", "u1"), "d.svc_svc/*.user_u1"},
		{e("wild", "w42"), "d.wild_w42"},
	}
	for _, tt := range tests {
		r := c.Match(tt.entries)
		if r == nil {
			t.Fatalf("Match(%v) = nil", tt.entries)
		}
		if got := r.MetricKey(tt.entries); got != tt.want {
			t.Errorf("MetricKey(%v) = %q, want %q", tt.entries, got, tt.want)
		}
	}
}

func TestSluiceExtensions(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "sluice.yaml")
	r := c.Match(e("identity", "user:42"))
	if got, want := r.Limit, (ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 20}); got != want {
		t.Errorf("identity Limit = %v, want %v", got, want)
	}
	if r.Algorithm != ratelimit.TokenBucket {
		t.Errorf("identity Algorithm = %v, want token_bucket", r.Algorithm)
	}
	r = c.Match(e("tier", "free", "identity", "ip:10.0.0.1"))
	if got, want := r.Limit, (ratelimit.Limit{Rate: 5, Period: 10 * time.Second}); got != want || r.Algorithm != ratelimit.SlidingWindowCounter {
		t.Errorf("window Limit = %v %v, want %v sliding_window_counter", got, r.Algorithm, want)
	}
	r = c.Match(e("quota", "daily", "identity", "user:42"))
	if r.Quota == nil || *r.Quota != (Quota{Period: "day", Limit: 10000}) {
		t.Errorf("Quota = %+v, want day 10000", r.Quota)
	}
}

func TestQuotaWindow(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 2, 14, 23, 30, 0, 0, time.FixedZone("X", -3*3600)) // 2026-02-15 02:30 UTC
	tests := []struct {
		q          Quota
		start, end time.Time
	}{
		{Quota{Period: QuotaDay}, time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 16, 0, 0, 0, 0, time.UTC)},
		{Quota{Period: QuotaMonth}, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		s, en := tt.q.Window(at)
		if !s.Equal(tt.start) || !en.Equal(tt.end) {
			t.Errorf("%s Window(%v) = %v, %v, want %v, %v", tt.q.Period, at, s, en, tt.start, tt.end)
		}
	}
}

func TestLoadDirAndSet(t *testing.T) {
	t.Parallel()
	s, err := LoadDir(filepath.Join("testdata", "good"))
	if err != nil {
		t.Fatalf("LoadDir = %v", err)
	}
	if got := len(s.Domains()); got < 3 {
		t.Fatalf("Domains() = %v, want at least 3", s.Domains())
	}
	if r := s.Match("test-domain", e("key2", "x")); r == nil || r.Key != "test-domain.key2" {
		t.Errorf("Set.Match = %v, want test-domain.key2", r)
	}
	if r := s.Match("nope", e("key2", "x")); r != nil {
		t.Errorf("Set.Match(unknown domain) = %v, want nil", r)
	}
	a, b := mustParse(t, "basic_config.yaml"), mustParse(t, "basic_config.yaml")
	_, err = NewSet(a, b)
	var errs *Errors
	if !errors.As(err, &errs) || len(*errs) != 1 {
		t.Fatalf("NewSet(dup) = %v, want one problem", err)
	}
	if got, want := (*errs)[0].Error(), `basic_config.yaml:2: domain: duplicate domain "test-domain" (also in basic_config.yaml)`; got != want {
		t.Errorf("NewSet(dup) = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
	}
}

// envoyproxy/ratelimit configs often say 4294967295 per second for "no
// real limit"; with no algorithm the rule is a fixed window, which counts
// that finely, so the config loads unchanged.
func TestHugeRequestsPerUnitLoadsAsFixedWindow(t *testing.T) {
	cfg, err := Parse("huge.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967295\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Match([]Entry{{Key: "k", Value: "v"}})
	if r == nil || r.Limit.Rate != 4294967295 || r.Algorithm != ratelimit.FixedWindow {
		t.Fatalf("Match = %+v, want the 4294967295/s fixed window", r)
	}
}

// TestMetadata: a descriptor's metadata is kept on its rule, as the file
// gives it, and changes no decision.
func TestMetadata(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "upstream_examples.yaml")
	r := c.Match(e("service", "billing"))
	if r == nil || !r.QuotaMode || r.Limit.Rate != 3 {
		t.Fatalf("Match(service=billing) = %v", r)
	}
	q, ok := r.Metadata["service_with_quota"].(map[string]any)
	if !ok || q["name"] != "billing" || q["weight"] != 2 {
		t.Errorf("Metadata = %#v", r.Metadata)
	}
	if r := c.Match(e("remote_address", "10.0.0.1")); r == nil || r.Metadata != nil {
		t.Errorf("a rule without metadata: %v, Metadata %v", r, r.Metadata)
	}
}
