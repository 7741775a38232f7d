package gateway_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/gateway"
)

// TestMetricsRuntimeCollectors: the gateway's /metrics has the standard
// Go runtime and process collectors and the store's metrics beside its
// decision metrics, as the RLS's has; a registry that has the collectors
// already keeps them.
func TestMetricsRuntimeCollectors(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Default()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector()) // a program's own: New must not fail on it
	g, err := gateway.New(context.Background(), cfg, gateway.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rec := httptest.NewRecorder()
	g.AdminHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"go_goroutines ", "go_gc_duration_seconds", "go_build_info{", "process_resident_memory_bytes ",
		"process_cpu_seconds_total ", "process_open_fds ", "sluice_store_up ", "sluice_store_keys "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
