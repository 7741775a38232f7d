package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// get returns url's status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRLSHealthyWithConfig: with --healthy-with-config (as with
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED) the server reports not serving
// on /healthcheck, /readyz and the gRPC health service while its
// configuration has no domain, and serving once a file with one arrives;
// /rlconfig then lists its rules. USE_PROMETHEUS serves /metrics on
// PROMETHEUS_ADDR too, and nothing else there.
func TestRLSHealthyWithConfig(t *testing.T) {
	t.Setenv("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
	t.Setenv("USE_PROMETHEUS", "true")
	t.Setenv("PROMETHEUS_ADDR", "127.0.0.1:0")
	dir := t.TempDir()
	grpcAddr, httpAddr, logs := startRLS(t, "--config-dir", dir, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--debug-listen", "127.0.0.1:0", "--poll", "10ms")
	m := debugRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no debug address in the logs:\n%s", logs)
	}
	debugAddr := m[1]
	mm := regexp.MustCompile(`sluice rls: listening.* metrics=(\S+)`).FindStringSubmatch(logs.String())
	if mm == nil {
		t.Fatalf("no metrics address (USE_PROMETHEUS, PROMETHEUS_ADDR) in the logs:\n%s", logs)
	}
	if code, body := get(t, "http://"+mm[1]+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines ") {
		t.Errorf("GET /metrics on the metrics listener: %d, %.200q", code, body)
	}
	if code, _ := get(t, "http://"+mm[1]+"/json"); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("the metrics listener serves /json: %d", code)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health check: %v", err)
		}
		return resp.GetStatus()
	}
	if code, _ := get(t, "http://"+httpAddr+"/healthcheck"); code != http.StatusInternalServerError {
		t.Errorf("/healthcheck with no configuration: %d, want 500", code)
	}
	if code, body := get(t, "http://"+httpAddr+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no configuration") {
		t.Errorf("/readyz with no configuration: %d %q, want 503 saying why", code, body)
	}
	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health with no configuration: %v, want NOT_SERVING", st)
	}
	if _, body := get(t, "http://"+debugAddr+"/rlconfig"); body != "" {
		t.Errorf("/rlconfig with no configuration: %q, want empty", body)
	}

	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "rls", "config", "edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
	for {
		if code, _ := get(t, "http://"+httpAddr+"/healthcheck"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthcheck never OK after the configuration arrived:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := health(); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health with a configuration: %v, want SERVING", st)
	}
	code, body := get(t, "http://"+debugAddr+"/rlconfig")
	for _, want := range []string{
		"edge.remote_address: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false, name: per-client (",
		"edge.api_key.path_/search*: unit=SECOND requests_per_unit=5, shadow_mode: false, quota_mode: false, name: search (",
		"edge.remote_address_10.0.0.1: unlimited, shadow_mode: false, quota_mode: false",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/rlconfig (%d) lacks %q:\n%s", code, want, body)
		}
	}
	if code, _ := get(t, "http://"+debugAddr+"/debug/pprof/cmdline"); code != http.StatusOK {
		t.Errorf("pprof beside /rlconfig: %d", code)
	}
	_, metrics := get(t, "http://"+httpAddr+"/metrics")
	for _, want := range []string{"go_goroutines ", "process_resident_memory_bytes ", "go_build_info{", "sluice_store_up "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
