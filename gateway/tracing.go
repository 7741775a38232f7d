package gateway

import (
	"context"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/tracing"
)

// TracingConfig is tracing: an OpenTelemetry span of every routed request
// (internal/server/tracing), the child of the caller's W3C trace context,
// with the rate limits' decisions, its context sent on to the upstream;
// off when absent. The exporter's endpoint and the rest are the OTEL_*
// variables. The tracer is the process's: a reload does not change it.
type TracingConfig struct {
	Protocol          string             // protocol: grpc or http/protobuf; empty: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf
	ServiceName       string             // service_name: empty: OTEL_SERVICE_NAME, else sluice-gateway
	ServiceNamespace  string             // service_namespace
	ServiceInstanceID string             // service_instance_id: empty: a random UUID
	SamplingRate      float64            // sampling_rate: 0 to 1 of the traces the gateway starts; -1 (absent): OTEL_TRACES_SAMPLER
	Identity          accesslog.Identity // identity: none (default), hashed or clear
}

// tracingSection decodes tracing.
func (t *top) tracingSection(v *yaml.Node) {
	d, c := t.d, &TracingConfig{SamplingRate: -1, Identity: accesslog.None}
	d.fields(v, "tracing", map[string]func(k, v *yaml.Node){
		"protocol": func(k, v *yaml.Node) {
			p, err := tracing.ParseProtocol(d.str(v, "tracing.protocol"))
			if err != nil {
				d.add(v.Line, "tracing.protocol", "want grpc or http/protobuf")
			}
			c.Protocol = p
		},
		"service_name":        func(k, v *yaml.Node) { c.ServiceName = d.str(v, "tracing.service_name") },
		"service_namespace":   func(k, v *yaml.Node) { c.ServiceNamespace = d.str(v, "tracing.service_namespace") },
		"service_instance_id": func(k, v *yaml.Node) { c.ServiceInstanceID = d.str(v, "tracing.service_instance_id") },
		"sampling_rate":       func(k, v *yaml.Node) { c.SamplingRate = d.number(v, "tracing.sampling_rate", 0, 1, true) },
		"identity": func(k, v *yaml.Node) {
			id, err := accesslog.ParseIdentityOr(d.str(v, "tracing.identity"), accesslog.None)
			if err != nil {
				d.add(v.Line, "tracing.identity", "want none, hashed or clear")
			}
			c.Identity = id
		},
	})
	t.c.Tracing = c
}

// openTracing starts the tracer of cfg, when it has one; hashed
// identities are the access log's (open it first).
func (g *Gateway) openTracing(ctx context.Context, cfg *Config) error {
	tc := cfg.Tracing
	if tc == nil {
		return nil
	}
	tr, err := tracing.New(ctx, tracing.Config{Server: "sluice-gateway", Protocol: tc.Protocol, ServiceName: tc.ServiceName,
		ServiceNamespace: tc.ServiceNamespace, ServiceInstanceID: tc.ServiceInstanceID, SamplingRate: tc.SamplingRate,
		Identity: tc.Identity, Hasher: g.access.Hasher(), Logger: g.log})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.tracer = tr
	return nil
}

// closeTracing exports the last spans (5 s at most).
func (g *Gateway) closeTracing() error {
	if g.tracer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.tracer.Shutdown(ctx); err != nil {
		g.log.Warn("gateway: tracing: last spans not exported", "err", err)
	}
	return nil
}

// traceObserver wraps the rate limits' observer with the request's span:
// each rule's decision is recorded on it; without a tracer it is next
// itself.
func (g *Gateway) traceObserver(next func(httplimit.Event)) func(httplimit.Event) {
	if g.tracer == nil {
		return next
	}
	return func(e httplimit.Event) {
		next(e)
		if e.Outcome > httplimit.StoreError || e.Ctx == nil { // refunds are not decisions
			return
		}
		tracing.FromContext(e.Ctx).Decision(e.Policy, e.Outcome.String(), e.Key, e.Latency)
	}
}
