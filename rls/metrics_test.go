package rls_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// TestDetailedMetricFlood sends 100k distinct values through a
// detailed_metric rule of a Server: its /metrics keeps at most
// DefaultMaxDetailedSeries+1 keys for the rule and stays small, and the
// overflow is counted.
func TestDetailedMetricFlood(t *testing.T) {
	t.Parallel()
	const values = 100_000
	cfg, err := rules.Parse("flood.yaml", []byte(`domain: flood
descriptors:
  - key: user
    detailed_metric: true
    rate_limit:
      unit: hour
      requests_per_unit: 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	srv, err := rls.New(store, set, rls.Options{MetricLabels: rls.MetricLabelsSluice})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	entry := &commonpb.RateLimitDescriptor_Entry{Key: "user"}
	req := &pb.RateLimitRequest{Domain: "flood", Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{entry}}}}
	for i := range values {
		entry.Value = fmt.Sprintf("user-%07d-%s", i, strings.Repeat("x", 300)) // cut to 256 bytes
		if _, err := srv.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}

	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	keys := map[string]map[string]bool{} // metric -> keys
	var overflow string
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "ratelimit_service_rate_limit_") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		_, key, _ := strings.Cut(rest, `key="`)
		key, _, _ = strings.Cut(key, `"`)
		if len(key) > rls.MaxMetricKeyLen {
			t.Errorf("%s: key of %d bytes, want at most %d", name, len(key), rls.MaxMetricKeyLen)
		}
		if keys[name] == nil {
			keys[name] = map[string]bool{}
		}
		keys[name][key] = true
		if name == "ratelimit_service_rate_limit_detailed_metric_overflow" {
			overflow = line
		}
	}
	for _, name := range []string{"total_hits", "within_limit", "over_limit", "near_limit", "shadow_mode"} {
		got := keys["ratelimit_service_rate_limit_"+name]
		if len(got) == 0 || len(got) > rls.DefaultMaxDetailedSeries+1 {
			t.Errorf("%s: %d keys, want 1 to %d", name, len(got), rls.DefaultMaxDetailedSeries+1)
		}
		if !got["user"+rls.OverflowKeySuffix] {
			t.Errorf("%s: no key %q", name, "user"+rls.OverflowKeySuffix)
		}
	}
	if want := fmt.Sprintf(`ratelimit_service_rate_limit_detailed_metric_overflow{domain="flood",key="user.__overflow__"} %d`, values-rls.DefaultMaxDetailedSeries); strings.TrimSpace(overflow) != want {
		t.Errorf("overflow counter: %q, want %q", overflow, want)
	}
	t.Logf("/metrics: %d bytes after %d distinct values", len(body), values)
	if limit := 5 * (rls.DefaultMaxDetailedSeries + 1) * (rls.MaxMetricKeyLen + 120); len(body) > limit {
		t.Errorf("/metrics is %d bytes, want at most %d", len(body), limit)
	}
}
