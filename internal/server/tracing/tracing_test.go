package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/internal/testharness/otlptest"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// newTracer is a Tracer exporting to rcv over proto, with the exporters'
// variables set for the process (they read it, not Config.Getenv).
func newTracer(t *testing.T, rcv *otlptest.Receiver, proto string, c tracing.Config) *tracing.Tracer {
	t.Helper()
	endpoint := rcv.HTTPURL
	if proto == "grpc" {
		endpoint = "http://" + rcv.GRPCAddr
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	c.Getenv = env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": proto})
	c.SamplingRate = -1
	tr, err := tracing.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestCallSpan: a gRPC call's span, over both OTLP transports, is the
// child of the caller's traceparent in its metadata, and carries the
// decisions, with no identity unless asked.
func TestCallSpan(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			rcv := otlptest.Start(t)
			tr := newTracer(t, rcv, proto, tracing.Config{Server: "sluice-rls", ServiceNamespace: "ns"})
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", traceparent))
			_, sp := tr.StartCall(ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
			sp.Decision("per_user", accesslog.Allowed, "user=alice", 0)
			sp.Decision("per_ip", accesslog.Denied, "ip=10.0.0.1", 0)
			sp.StoreTime(3 * time.Millisecond)
			sp.End()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			s := rcv.Wait(t, callerTrace, 10*time.Second)
			if s.ParentSpanID != callerSpan || s.Name != "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" {
				t.Errorf("span %+v: want parent %s", s, callerSpan)
			}
			want := map[string]string{"sluice.rule": "per_user,per_ip", "sluice.outcome": "allowed,denied", "sluice.decision": "denied",
				"sluice.store.duration": "0.003", "rpc.method": "ShouldRateLimit"}
			for k, v := range want {
				if s.Attrs[k] != v {
					t.Errorf("%s = %q, want %q", k, s.Attrs[k], v)
				}
			}
			if _, ok := s.Attrs["sluice.identity"]; ok {
				t.Errorf("identity without being asked: %v", s.Attrs)
			}
			if s.Resource["service.name"] != "sluice-rls" || s.Resource["service.namespace"] != "ns" || s.Resource["service.instance.id"] == "" {
				t.Errorf("resource %v", s.Resource)
			}
			g, h := rcv.Requests()
			if (proto == "grpc") != (g > 0 && h == 0) {
				t.Errorf("exported %d times over gRPC, %d over HTTP", g, h)
			}
		})
	}
}

// TestRequestSpanInject: an HTTP request's span is the child of its
// traceparent, and what the server sends on carries the span's context.
func TestRequestSpanInject(t *testing.T) {
	rcv := otlptest.Start(t)
	tr := newTracer(t, rcv, "http/protobuf", tracing.Config{Server: "sluice-gateway", Identity: accesslog.Hashed})
	r := httptest.NewRequest("GET", "/v1/items", nil)
	r.Header.Set("Traceparent", traceparent)
	r, sp := tr.StartRequest(r)
	if tracing.FromContext(r.Context()) != sp || sp == nil {
		t.Fatal("the request does not carry its span")
	}
	sp.Decision("api", accesslog.Allowed, "user=alice", time.Millisecond)
	out := http.Header{}
	tracing.Inject(r.Context(), out)
	sp.End()
	tr.Shutdown(context.Background())
	s := rcv.Wait(t, callerTrace, 10*time.Second)
	if got := out.Get("Traceparent"); got != "00-"+callerTrace+"-"+s.SpanID+"-01" {
		t.Errorf("upstream traceparent %q, want the gateway's span %s", got, s.SpanID)
	}
	if id := s.Attrs["sluice.identity"]; len(id) != accesslog.HashLen || strings.Contains(id, "alice") {
		t.Errorf("identity %q: want a hash", id)
	}
}

// TestNilTracer: off, nothing is traced and nothing allocated.
func TestNilTracer(t *testing.T) {
	var tr *tracing.Tracer
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		c, sp := tr.StartCall(ctx, "/a/b")
		sp.Decision("r", accesslog.Allowed, "k", 0)
		sp.End()
		tracing.Inject(c, nil)
	}); n != 0 {
		t.Errorf("%v allocations with tracing off", n)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []tracing.Config{{Protocol: "http/json"}, {SamplingRate: 2}} {
		if _, err := tracing.New(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
