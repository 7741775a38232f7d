package rls_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

const labelsConfig = `
domain: test
descriptors:
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: api
    value: a
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: deep
    descriptors:
      - key: b
        descriptors:
          - key: c
            rate_limit: {unit: minute, requests_per_unit: 5}
`

// TestMetricLabels checks both label schemes of the per-rule metrics: the
// envoy one (the default) as envoyproxy/ratelimit's Prometheus mapping
// (src/stats/prom/default_mapper.yaml) labels its stats keys — key1 and key2
// the first two parts after the domain, later parts dropped — and sluice's
// whole key.
func TestMetricLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme rls.MetricLabels
		want   []string
	}{
		{rls.MetricLabelsEnvoy, []string{
			`ratelimit_service_rate_limit_total_hits{domain="test",key1="one",key2=""} 1`,
			`ratelimit_service_rate_limit_total_hits{domain="test",key1="api_a",key2="path"} 1`,
			`ratelimit_service_rate_limit_total_hits{domain="test",key1="deep",key2="b"} 1`,
		}},
		{rls.MetricLabelsSluice, []string{
			`ratelimit_service_rate_limit_total_hits{domain="test",key="one"} 1`,
			`ratelimit_service_rate_limit_total_hits{domain="test",key="api_a.path"} 1`,
			`ratelimit_service_rate_limit_total_hits{domain="test",key="deep.b.c"} 1`,
		}},
	} {
		t.Run(tc.scheme.String(), func(t *testing.T) {
			t.Parallel()
			h := &harness{clock: &clock{t: t0}, dir: t.TempDir()}
			writeConfig(t, h.dir, "test.yaml", labelsConfig)
			set, err := rules.LoadDir(h.dir)
			if err != nil {
				t.Fatal(err)
			}
			h.start(t, memoryStore, set, rls.Options{MetricLabels: tc.scheme})
			h.call(t, 0, d("one", "x"))
			h.call(t, 0, d("api", "a", "path", "/p"))
			h.call(t, 0, d("deep", "x", "b", "y", "c", "z"))
			rec := httptest.NewRecorder()
			h.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body, _ := io.ReadAll(rec.Body)
			for _, w := range tc.want {
				if !strings.Contains(string(body), w+"\n") {
					t.Errorf("/metrics has no %s", w)
				}
			}
		})
	}
	for _, s := range []string{"", "envoy", "sluice"} {
		if _, err := rls.ParseMetricLabels(s); err != nil {
			t.Errorf("ParseMetricLabels(%q) = %v", s, err)
		}
	}
	if _, err := rls.ParseMetricLabels("statsd"); err == nil {
		t.Error("ParseMetricLabels(statsd) = nil error")
	}
}
