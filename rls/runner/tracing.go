package runner

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/internal/server/tracing"
)

// rlsTracingFlags are --tracing and its settings: OpenTelemetry spans of
// every call (internal/server/tracing), exported over OTLP to where the
// OTEL_EXPORTER_OTLP_* variables say; off by default.
type rlsTracingFlags struct {
	on                                         bool
	protocol, service, namespace, instance, id string
	rate                                       float64
}

func (t *rlsTracingFlags) add(fs *flag.FlagSet) {
	fs.BoolVar(&t.on, "tracing", false, "make an OpenTelemetry span of every call, the child of the caller's W3C trace context (traceparent, tracestate), exported over OTLP to OTEL_EXPORTER_OTLP_ENDPOINT (envoyproxy/ratelimit's TRACING_ENABLED)")
	fs.StringVar(&t.protocol, "tracing-protocol", "", "with --tracing, the OTLP transport: grpc or http/protobuf (http); empty: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf (envoyproxy/ratelimit's TRACING_EXPORTER_PROTOCOL)")
	fs.StringVar(&t.service, "tracing-service-name", "", "with --tracing, the spans' service.name; empty: OTEL_SERVICE_NAME, else sluice-rls (envoyproxy/ratelimit's TRACING_SERVICE_NAME)")
	fs.StringVar(&t.namespace, "tracing-service-namespace", "", "with --tracing, the spans' service.namespace; empty: OTEL_RESOURCE_ATTRIBUTES's, if any (envoyproxy/ratelimit's TRACING_SERVICE_NAMESPACE)")
	fs.StringVar(&t.instance, "tracing-service-instance-id", "", "with --tracing, the spans' service.instance.id; empty: OTEL_RESOURCE_ATTRIBUTES's, else a random UUID (envoyproxy/ratelimit's TRACING_SERVICE_INSTANCE_ID)")
	fs.Float64Var(&t.rate, "tracing-sampling-rate", -1, "with --tracing, the fraction (0 to 1) of the traces sluice starts that are sampled; a caller's sampled trace always is (parent based); negative: OTEL_TRACES_SAMPLER, else every one (envoyproxy/ratelimit's TRACING_SAMPLING_RATE)")
	fs.StringVar(&t.id, "tracing-identity", "none", "what a span says of the caller (the store keys decided): none, hashed (HMAC, the access log's hashes when --access-log is on) or clear")
}

func (t *rlsTracingFlags) check() error {
	if _, err := accesslog.ParseIdentityOr(t.id, accesslog.None); err != nil {
		return fmt.Errorf("%w: --tracing-identity: %v", ErrUsage, err)
	}
	if t.protocol != "" {
		if _, err := tracing.ParseProtocol(t.protocol); err != nil {
			return fmt.Errorf("%w: --tracing-protocol: %v", ErrUsage, err)
		}
	}
	if t.rate > 1 || t.rate != t.rate {
		return fmt.Errorf("%w: --tracing-sampling-rate %v: want 0 to 1 (negative: OTEL_TRACES_SAMPLER)", ErrUsage, t.rate)
	}
	return nil
}

// open starts the tracer, or returns nil without --tracing. Hashed
// identities are the access log's when it is on, else under keyFile's
// key (--access-log-key-file) when there is one.
func (t *rlsTracingFlags) open(ctx context.Context, log *slog.Logger, access *accesslog.Log, keyFile string) (*tracing.Tracer, error) {
	if !t.on {
		return nil, nil
	}
	id, _ := accesslog.ParseIdentityOr(t.id, accesslog.None) // checked
	hasher := access.Hasher()
	if hasher == nil && id == accesslog.Hashed {
		key, err := accesslog.LoadKey(keyFile)
		if err != nil {
			return nil, fmt.Errorf("rls: %w", err)
		}
		if hasher, err = accesslog.NewHasher(key); err != nil {
			return nil, fmt.Errorf("rls: %w", err)
		}
	}
	tr, err := tracing.New(ctx, tracing.Config{Server: "sluice-rls", Protocol: t.protocol, ServiceName: t.service,
		ServiceNamespace: t.namespace, ServiceInstanceID: t.instance, SamplingRate: t.rate, Identity: id,
		Hasher: hasher, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	return tr, nil
}
