package rls

import (
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/rules"
)

const boundedConfig = `domain: test
descriptors:
  - key: detailed
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: other
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: user
        rate_limit:
          unit: minute
          requests_per_unit: 5
  - key: plain
    rate_limit:
      unit: minute
      requests_per_unit: 5
`

func boundedSet(t testing.TB) *rules.Set {
	t.Helper()
	cfg, err := rules.Parse("test.yaml", []byte(boundedConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// count is what forRule (or forKey, for an override) counts one hit of
// entries under.
func count(t testing.TB, m *metrics, set *rules.Set, entries ...rules.Entry) {
	t.Helper()
	r := set.Match("test", entries)
	if r == nil {
		t.Fatalf("no rule matches %v", entries)
	}
	m.forRule(r, entries).totalHits.Inc()
}

// series returns the key labels of metric name in reg with their values.
func series(t testing.TB, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// byPrefix counts the keys of got starting with each prefix, and sums
// their values.
func byPrefix(got map[string]float64, prefix string) (n int, sum float64) {
	for k, v := range got {
		if strings.HasPrefix(k, prefix) {
			n++
			sum += v
		}
	}
	return n, sum
}

func TestDetailedMetricsBounded(t *testing.T) {
	t.Parallel()
	const max, values = 10, 1000
	reg := prometheus.NewRegistry()
	m, err := newBoundedMetrics(reg, max)
	if err != nil {
		t.Fatal(err)
	}
	set := boundedSet(t)
	for i := range values {
		v := fmt.Sprint("v", i)
		count(t, m, set, rules.Entry{Key: "detailed", Value: v})
		count(t, m, set, rules.Entry{Key: "detailed", Value: v}) // the same value twice
		count(t, m, set, rules.Entry{Key: "other", Value: v})
		count(t, m, set, rules.Entry{Key: "tenant", Value: v}, rules.Entry{Key: "user", Value: "u"})
		count(t, m, set, rules.Entry{Key: "plain", Value: v})
		m.forKey("test", overrideMetricKey("test", []rules.Entry{{Key: "override", Value: v}})).totalHits.Inc()
	}

	hits := series(t, reg, "ratelimit_service_rate_limit_total_hits")
	for _, tc := range []struct {
		prefix, overflow string
		perValue         float64
	}{
		{"detailed_", "detailed.__overflow__", 2},
		{"other_", "other.__overflow__", 1},
		{"tenant_", "tenant.user.__overflow__", 1},
		{"override_", "__overflow__", 1},
	} {
		n, sum := byPrefix(hits, tc.prefix)
		if n != max {
			t.Errorf("%s*: %d series, want %d", tc.prefix, n, max)
		}
		if want := max * tc.perValue; sum != want {
			t.Errorf("%s*: %v hits, want %v", tc.prefix, sum, want)
		}
		if got, want := hits[tc.overflow], (values-max)*tc.perValue; got != want {
			t.Errorf("%s = %v, want %v", tc.overflow, got, want)
		}
		if got, want := series(t, reg, "ratelimit_service_rate_limit_detailed_metric_overflow")[tc.overflow], (values-max)*tc.perValue; got != want {
			t.Errorf("detailed_metric_overflow{key=%q} = %v, want %v", tc.overflow, got, want)
		}
	}
	if got := hits["plain"]; got != values {
		t.Errorf("plain = %v, want %v", got, values)
	}
	// Every vector has the same keys: 4 families of max+1, and plain.
	for _, name := range []string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"} {
		if got, want := len(series(t, reg, "ratelimit_service_rate_limit_"+name)), 4*(max+1)+1; got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
	n := 0
	m.byKey.Range(func(any, any) bool { n++; return true })
	if want := 4*max + 1; n != want {
		t.Errorf("byKey holds %d keys, want %d", n, want)
	}
}

func TestDetailedMetricsOff(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := newBoundedMetrics(reg, -1)
	if err != nil {
		t.Fatal(err)
	}
	set := boundedSet(t)
	for i := range 5 {
		count(t, m, set, rules.Entry{Key: "detailed", Value: fmt.Sprint(i)})
	}
	if got, want := series(t, reg, "ratelimit_service_rate_limit_total_hits"), map[string]float64{"detailed.__overflow__": 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("total_hits = %v, want %v", got, want)
	}
}

func TestMetricKeyCut(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := newBoundedMetrics(reg, 0)
	if err != nil {
		t.Fatal(err)
	}
	set := boundedSet(t)
	long := strings.Repeat("a", MaxMetricKeyLen)
	values := []string{
		long + "x",                           // cut: shares long's series
		long + "y",                           // and this one
		strings.Repeat("é", MaxMetricKeyLen), // 2-byte runes: cut at a boundary
		strings.Repeat("a", MaxMetricKeyLen-len("detailed_")-1) + "日本", // a 3-byte rune across the cut
		"bad\xff\xfeutf8", // Prometheus would panic on it
		strings.Repeat("\xff", 2*MaxMetricKeyLen),
	}
	for _, v := range values {
		count(t, m, set, rules.Entry{Key: "detailed", Value: v})
	}
	got := series(t, reg, "ratelimit_service_rate_limit_total_hits")
	for k := range got {
		if len(k) > MaxMetricKeyLen {
			t.Errorf("key %q: %d bytes, want at most %d", k, len(k), MaxMetricKeyLen)
		}
		if !utf8.ValidString(k) {
			t.Errorf("key %q is not UTF-8", k)
		}
	}
	if want := "detailed_" + long[:MaxMetricKeyLen-len("detailed_")]; got[want] != 2 {
		t.Errorf("total_hits{key=%q} = %v, want 2 (the two long values); got %v", want, got[want], got)
	}
	if len(got) != 5 {
		t.Errorf("%d series, want 5: %v", len(got), got)
	}
}

// TestDetailedMetricsConcurrent races goroutines for the last keys of a
// family: no key is lost, no slot leaks, every hit is counted once.
func TestDetailedMetricsConcurrent(t *testing.T) {
	t.Parallel()
	const max, workers, values = 50, 8, 400
	reg := prometheus.NewRegistry()
	m, err := newBoundedMetrics(reg, max)
	if err != nil {
		t.Fatal(err)
	}
	set := boundedSet(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range values {
				v := fmt.Sprint((i + w*7) % values)
				count(t, m, set, rules.Entry{Key: "detailed", Value: v})
			}
		})
	}
	wg.Wait()
	got := series(t, reg, "ratelimit_service_rate_limit_total_hits")
	n, sum := byPrefix(got, "detailed_")
	if n != max {
		t.Errorf("%d detailed series, want %d", n, max)
	}
	if total := sum + got["detailed.__overflow__"]; total != workers*values {
		t.Errorf("%v hits counted, want %v", total, workers*values)
	}
	v, _ := m.rules.Load("test.detailed")
	if got := v.(*family).n.Load(); got != max {
		t.Errorf("family holds %d slots, want %d", got, max)
	}
}

// TestDetailedMetricsMemory sends 100k distinct values through a
// detailed_metric rule and a limit override with the default bound: at
// most DefaultMaxDetailedSeries+1 keys each, a heap that does not grow with
// the values, and a small /metrics.
func TestDetailedMetricsMemory(t *testing.T) {
	const values = 100_000
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	set := boundedSet(t)
	r := set.Match("test", []rules.Entry{{Key: "detailed", Value: "x"}})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	entries, override := make([]rules.Entry, 1), make([]rules.Entry, 1)
	for i := range values {
		// 100 bytes each: 10 MB of values in all.
		v := fmt.Sprintf("%0100d", i)
		entries[0] = rules.Entry{Key: "detailed", Value: v}
		m.forRule(r, entries).totalHits.Inc()
		override[0] = rules.Entry{Key: "override", Value: v}
		m.forKey("test", overrideMetricKey("test", override)).totalHits.Inc()
	}
	grown := int64(heap()) - int64(before)
	runtime.KeepAlive(m)

	const max = DefaultMaxDetailedSeries
	hits := series(t, reg, "ratelimit_service_rate_limit_total_hits")
	if n, _ := byPrefix(hits, "detailed"); n > max+1 {
		t.Errorf("%d detailed series, want at most %d", n, max+1)
	}
	if len(hits) > 2*(max+1) {
		t.Errorf("%d series, want at most %d", len(hits), 2*(max+1))
	}
	if got := hits["detailed.__overflow__"]; got != values-max {
		t.Errorf("detailed.__overflow__ = %v, want %v", got, values-max)
	}
	// 2 families × 1000 keys × 5 counters: 5.5 MB measured; 100k values
	// of one rule unbounded took 284 MB.
	t.Logf("heap grew %.1f MB for %d keys", float64(grown)/1e6, 2*max)
	if limit := int64(16 << 20); grown > limit {
		t.Errorf("heap grew %d bytes, want at most %d", grown, limit)
	}

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	// Each of 5 counters has 2×1001 lines of at most about
	// MaxMetricKeyLen+100 bytes.
	t.Logf("/metrics: %d bytes", len(body))
	if limit := 5 * 2 * (max + 1) * (MaxMetricKeyLen + 100); len(body) > limit {
		t.Errorf("/metrics is %d bytes, want at most %d", len(body), limit)
	}
}

// BenchmarkForRule measures the counters lookup of a descriptor: a plain
// rule, a detailed_metric value that has its key, and one counted under
// the overflow key.
func BenchmarkForRule(b *testing.B) {
	m, err := newBoundedMetrics(prometheus.NewRegistry(), 10)
	if err != nil {
		b.Fatal(err)
	}
	set := boundedSet(b)
	for i := range 10 {
		count(b, m, set, rules.Entry{Key: "detailed", Value: fmt.Sprint("v", i)})
	}
	for _, bc := range []struct {
		name  string
		entry rules.Entry
	}{
		{"plain", rules.Entry{Key: "plain", Value: "v"}},
		{"detailed", rules.Entry{Key: "detailed", Value: "v7"}},
		{"overflow", rules.Entry{Key: "detailed", Value: "v123"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			entries := []rules.Entry{bc.entry}
			r := set.Match("test", entries)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m.forRule(r, entries)
				}
			})
		})
	}
}
