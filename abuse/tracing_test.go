package abuse

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/testharness/otlptest"
)

// The caller's trace context: the span of Envoy's (or a client's) that
// asked.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// envoyGatewayTracing is what Envoy Gateway sets on its rate limit
// Deployment with rateLimit.telemetry.tracing (its enable-tracing
// testdata), besides the listeners and the rules' source: endpoint is
// OTEL_EXPORTER_OTLP_ENDPOINT.
func envoyGatewayTracing(t *testing.T, endpoint string) {
	for k, v := range map[string]string{
		"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit", "TRACING_SERVICE_NAMESPACE": "envoy-gateway-system",
		"TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-7d9c5-x2x4q", "TRACING_SAMPLING_RATE": "1.0",
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
		"LOG_LEVEL":                   "info", "RUNTIME_IGNOREDOTFILES": "true", "RUNTIME_WATCH_ROOT": "false",
		"FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
		// Exported every 50 ms rather than every 5 s: the test's wait.
		"OTEL_BSP_SCHEDULE_DELAY": "50",
	} {
		t.Setenv(k, v)
	}
}

// Attack, of a kind: Envoy Gateway's tracing option made sluice rls
// refuse to start (TRACING_ENABLED=true, exit 2), taking global rate
// limiting down with it.
//
// Bound: sluice rls starts under that environment, with either gRPC
// server, and a call's span reaches the OTLP receiver (over HTTP, Envoy
// Gateway's default, and gRPC) as the child of the caller's traceparent,
// with the rules and outcomes, and no identity.
func TestRLSTracingEnvoyGateway(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", `
domain: abuse
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 1}
`)
	for _, server := range []string{"lean", "grpc-go"} {
		for _, proto := range []string{"http", "grpc"} {
			t.Run(server+"/"+proto, func(t *testing.T) {
				rcv := otlptest.Start(t)
				endpoint := rcv.HTTPURL
				if proto == "grpc" {
					endpoint = "http://" + rcv.GRPCAddr
					t.Setenv("TRACING_EXPORTER_PROTOCOL", "grpc")
				}
				envoyGatewayTracing(t, endpoint)
				r := startRLS(t, dir, "--grpc-server", server)
				codes := callTraced(t, r.grpc, 2)
				if codes != "OK,OVER_LIMIT" {
					t.Errorf("answers %s, want OK,OVER_LIMIT", codes)
				}
				s := rcv.Wait(t, callerTrace, 30*time.Second)
				if s.ParentSpanID != callerSpan {
					t.Errorf("span's parent %q, want the caller's %s", s.ParentSpanID, callerSpan)
				}
				if s.Name != "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" || s.Attrs["sluice.rule"] != "abuse.client" ||
					s.Attrs["ratelimit.domain"] != "abuse" || s.Attrs["sluice.store.duration"] == "" {
					t.Errorf("span %s %v", s.Name, s.Attrs)
				}
				if _, ok := s.Attrs["sluice.identity"]; ok {
					t.Errorf("the span names the caller unasked: %v", s.Attrs)
				}
				want := map[string]string{"service.name": "envoy-ratelimit", "service.namespace": "envoy-gateway-system",
					"service.instance.id": "envoy-ratelimit-7d9c5-x2x4q"}
				for k, v := range want {
					if s.Resource[k] != v {
						t.Errorf("resource %s = %q, want %q", k, s.Resource[k], v)
					}
				}
				// Both calls' spans, denial included.
				deadline := time.Now().Add(30 * time.Second)
				for outcomes := spanOutcomes(rcv); outcomes != "allowed,denied"; outcomes = spanOutcomes(rcv) {
					if time.Now().After(deadline) {
						t.Fatalf("outcomes of the trace's spans %q, want allowed,denied", outcomes)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}
}

// Bound: with the collector unreachable, every call is still answered:
// the spans are dropped past the exporter's bounded queue, the calls
// never wait on it.
func TestRLSTracingCollectorDown(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", "domain: abuse\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there
	envoyGatewayTracing(t, down)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "16")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200") // ms: the stop waits on no export long
	r := startRLS(t, dir)
	const calls = 500
	if codes := callTraced(t, r.grpc, calls); !strings.HasPrefix(codes, "OK,OVER_LIMIT") || strings.Count(codes, ",") != calls-1 {
		t.Errorf("%d calls answered %q", calls, codes[:min(len(codes), 80)])
	}
	r.alive(t)
}

// callTraced makes n calls on addr as a traced Envoy would (traceparent
// in the metadata), for client=alice, and returns their codes.
func callTraced(t *testing.T, addr string, n int) string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	codes := ""
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", traceparent, "tracestate", "envoy=1")
		resp, err := c.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "abuse", HitsAddend: 1,
			Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "client", Value: "alice"}}}}})
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if i > 0 {
			codes += ","
		}
		codes += fmt.Sprint(resp.OverallCode)
	}
	return codes
}

// spanOutcomes is the sluice.outcome of the caller's trace's spans, in
// the order received.
func spanOutcomes(rcv *otlptest.Receiver) string {
	out := ""
	for _, s := range rcv.Spans() {
		if s.TraceID == callerTrace {
			if out != "" {
				out += ","
			}
			out += s.Attrs["sluice.outcome"]
		}
	}
	return out
}

// Attack: a gateway whose spans named its callers (API keys, addresses)
// to a tracing backend that keeps them, or that broke the trace between
// the caller and the upstream.
//
// Bound: `sluice serve` with tracing: makes a span per routed request,
// the child of the caller's traceparent, with the rule and outcome of
// each decision and the caller hashed (identity: hashed) — never in
// clear; the upstream gets the gateway's span as its parent.
func TestGatewayTracing(t *testing.T) {
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.HTTPURL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	up := newUpstream(t)
	dir := t.TempDir()
	g := startServe(t, writeFile(t, dir, "gateway.yaml", perIPGateway(up.srv.URL, "tracing: {service_name: edge, identity: hashed}", "token_bucket", 1)))
	c := client(t)
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if code, _, body := do(t, c, "GET", g.url+"/items", "Traceparent", traceparent); code != want {
			t.Fatalf("request %d: %d %s, want %d", i, code, body, want)
		}
	}
	s := rcv.Wait(t, callerTrace, 30*time.Second)
	if s.ParentSpanID != callerSpan || s.Name != "GET" || s.Attrs["sluice.rule"] != "per-ip" || s.Attrs["url.path"] != "/items" ||
		s.Resource["service.name"] != "edge" {
		t.Errorf("span %s (parent %s) %v %v", s.Name, s.ParentSpanID, s.Attrs, s.Resource)
	}
	if id := s.Attrs["sluice.identity"]; len(id) != 16 || strings.Contains(id, "127.0.0.1") {
		t.Errorf("identity %q: want a 16-digit hash, not the address", id)
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests upstream, want 1", len(reqs))
	}
	if got, want := reqs[0].Header.Get("Traceparent"), "00-"+callerTrace+"-"+s.SpanID+"-01"; got != want {
		t.Errorf("upstream traceparent %q, want %q (the gateway's span)", got, want)
	}
	deadline := time.Now().Add(30 * time.Second)
	for outcomes := spanOutcomes(rcv); outcomes != "allowed,denied"; outcomes = spanOutcomes(rcv) {
		if time.Now().After(deadline) {
			t.Fatalf("outcomes of the trace's spans %q, want allowed,denied", outcomes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
