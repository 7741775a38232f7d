package xds_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/rls/xds"
	"github.com/sluicehq/sluice/rules"
)

// TestConvert: every field of the proto reaches the rule, as the same
// config read from YAML.
func TestConvert(t *testing.T) {
	rc := &rlsconf.RateLimitConfig{Name: "gw", Domain: "gateway", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "remote_address", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 10, Name: "per-ip"},
			ShadowMode: true, DetailedMetric: true},
		{Key: "user", Value: "admin", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}},
		{Key: "path", Value: "/api", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "method", Value: "POST", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 100,
				Name: "posts", Replaces: []*rlsconf.RateLimitReplace{{Name: "per-ip"}}}},
		}},
	}}
	got, err := xds.Convert(rc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rules.Parse("xds:gw", []byte(`
domain: gateway
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10, name: per-ip}
    shadow_mode: true
    detailed_metric: true
  - key: user
    value: admin
    rate_limit: {unlimited: true}
  - key: path
    value: /api
    descriptors:
      - key: method
        value: POST
        rate_limit: {unit: hour, requests_per_unit: 100, name: posts, replaces: [{name: per-ip}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Domain != want.Domain || len(got.Rules()) != len(want.Rules()) {
		t.Fatalf("got %d rules in %q, want %d in %q", len(got.Rules()), got.Domain, len(want.Rules()), want.Domain)
	}
	for i, g := range got.Rules() {
		w := want.Rules()[i]
		if g.Name != w.Name || g.Limit != w.Limit || g.Unlimited != w.Unlimited || g.ShadowMode != w.ShadowMode ||
			g.DetailedMetric != w.DetailedMetric || strings.Join(g.Replaces, ",") != strings.Join(w.Replaces, ",") {
			t.Errorf("rule %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	good, _ := anypb.New(limitConfig("a", "a", "x", 1))
	for name, res := range map[string][]*anypb.Any{
		"not a RateLimitConfig": {{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}},
		"bad bytes":             {{TypeUrl: xds.TypeURL, Value: []byte{0xff, 0xff}}},
		"a name twice":          {good, good},
		"unlimited with a unit": {mustAny(t, &rlsconf.RateLimitConfig{Name: "u", Domain: "u", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true, Unit: rlsconf.RateLimitUnit_SECOND}}}})},
		"no unit": {mustAny(t, &rlsconf.RateLimitConfig{Name: "n", Domain: "n", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 3}}}})},
		"no domain": {mustAny(t, &rlsconf.RateLimitConfig{Name: "d"})},
	} {
		if _, _, err := xds.Build(res); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	set, names, err := xds.Build(nil)
	if err != nil || len(set.Domains()) != 0 || len(names) != 0 {
		t.Fatalf("no resources: %v, %v, %v; want an empty set", set, names, err)
	}
}

func mustAny(t testing.TB, rc *rlsconf.RateLimitConfig) *anypb.Any {
	a, err := anypb.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// FuzzBuild: whatever bytes a management server sends, Build returns a
// set or an error, never a panic.
func FuzzBuild(f *testing.F) {
	for _, rc := range []*rlsconf.RateLimitConfig{limitConfig("a", "a", "x", 1), {Name: "e", Domain: "e"},
		{Name: "deep", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "a", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "b",
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_DAY, RequestsPerUnit: 1}}}}}}} {
		a, _ := anypb.New(rc)
		f.Add(a.Value)
	}
	md, _ := structpb.NewStruct(map[string]any{"a": []any{1.5, "x", map[string]any{"b": nil}}})
	q, _ := anypb.New(&rlsconf.RateLimitConfig{Name: "q", Domain: "q", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", QuotaMode: true,
		Metadata: md, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_WEEK, RequestsPerUnit: 2}}}})
	f.Add(q.Value)
	f.Add([]byte{0x1a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		set, _, err := xds.Build([]*anypb.Any{{TypeUrl: xds.TypeURL, Value: b}})
		if err == nil && set == nil {
			t.Fatal("no set and no error")
		}
	})
}

// TestConvertValuesExact: keys and values reach the rules exactly,
// whatever YAML would make of them unquoted.
func TestConvertValuesExact(t *testing.T) {
	values := []string{"yes", "off", "~", "null", "0x10", "1e3", "#x", "a: b", "- x", "[x]", "{x}", "line\nbreak",
		"tab\there", "\u2028", `"quoted"`, `back\slash`, "<&>", "ünïcödé", " padded ", "*alias", "&anchor", "!tag", "%x", "@x", "`x`"}
	for _, v := range values {
		rc := &rlsconf.RateLimitConfig{Name: "v", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{{
			Key: "k " + v, Value: v, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 1}}}}
		cfg, err := xds.Convert(rc)
		if err != nil {
			t.Errorf("value %q: %v", v, err)
			continue
		}
		if cfg.Match([]rules.Entry{{Key: "k " + v, Value: v}}) == nil {
			t.Errorf("value %q: the rule does not match it", v)
		}
	}
}

// TestConvertQuotaModeAndMetadata: quota_mode and metadata (fields 7 and
// 8 of upstream's RateLimitDescriptor) reach the rule as the same
// descriptor read from YAML gives them; a metadata number that JSON cannot
// carry is refused, naming where it is.
func TestConvertQuotaModeAndMetadata(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"tier": "gold", "weight": 1.5, "n": 3, "on": true, "none": nil,
		"list": []any{"a", 2}, "nested": map[string]any{"k": "v", "yes": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &rlsconf.RateLimitConfig{Name: "q", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "quota", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_WEEK, RequestsPerUnit: 5}, QuotaMode: true, Metadata: md},
		{Key: "plain", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 5}, Metadata: &structpb.Struct{}},
	}}
	got, err := xds.Convert(rc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rules.Parse("q.yaml", []byte(`
domain: d
descriptors:
  - key: quota
    rate_limit: {unit: week, requests_per_unit: 5}
    quota_mode: true
    metadata: {tier: gold, weight: 1.5, n: 3, "on": true, none: null, list: [a, 2], nested: {k: v, "yes": "yes"}}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 5}
    metadata: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got.Rules() {
		w := want.Rules()[i]
		if g.QuotaMode != w.QuotaMode || g.Limit != w.Limit {
			t.Errorf("rule %d: quota_mode %v, limit %v; want %v, %v", i, g.QuotaMode, g.Limit, w.QuotaMode, w.Limit)
		}
		gs, err1 := structpb.NewStruct(g.Metadata)
		ws, err2 := structpb.NewStruct(w.Metadata)
		if err1 != nil || err2 != nil || !proto.Equal(gs, ws) {
			t.Errorf("rule %d: metadata %v (%v), want %v (%v)", i, gs, err1, ws, err2)
		}
	}
	if !got.Rules()[0].QuotaMode || got.Rules()[0].Metadata["tier"] != "gold" {
		t.Fatalf("quota_mode or metadata lost: %+v", got.Rules()[0])
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		md := &structpb.Struct{Fields: map[string]*structpb.Value{"deep": structpb.NewListValue(&structpb.ListValue{
			Values: []*structpb.Value{structpb.NewNumberValue(bad)}})}}
		rc := &rlsconf.RateLimitConfig{Name: "nan", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "a",
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "b", Metadata: md}}}}}
		_, err := xds.Convert(rc)
		if err == nil || !strings.Contains(err.Error(), "xds:nan: descriptors[0].descriptors[0].metadata.deep[0]") {
			t.Errorf("%v in metadata: %v, want a refusal naming where", bad, err)
		}
	}
}

// BenchmarkBuild decodes and converts one response of 7000 descriptors
// (about 0.8 MB on the wire), the cost of each push of a large config.
func BenchmarkBuild(b *testing.B) {
	rc := &rlsconf.RateLimitConfig{Name: "big", Domain: "big"}
	for i := range 7000 {
		rc.Descriptors = append(rc.Descriptors, &rlsconf.RateLimitDescriptor{Key: "api_key", Value: fmt.Sprintf("%08d-%s", i, strings.Repeat("v", 90)),
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 5}})
	}
	res := []*anypb.Any{mustAny(b, rc)}
	b.ReportAllocs()
	b.SetBytes(int64(len(res[0].Value)))
	for b.Loop() {
		if _, _, err := xds.Build(res); err != nil {
			b.Fatal(err)
		}
	}
}
