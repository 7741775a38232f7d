// Package tracing is the servers' OpenTelemetry traces, off by default: a
// span per decision (a sluice rls call, a gateway request), its parent
// read from the caller's W3C trace context (traceparent, tracestate) in
// the gRPC metadata or the HTTP request, exported over OTLP (gRPC or
// HTTP/protobuf) as the standard OTEL_* variables say. It is the one
// package of the module that imports OpenTelemetry.
//
// A span carries the decision as attributes:
//
//	sluice.rule            the rules decided, in order (string array)
//	sluice.outcome         each one's outcome: allowed, denied, shadow_denied, store_error
//	sluice.decision        the request's: the first outcome other than allowed, else allowed
//	sluice.store.duration  seconds spent in the store for it (float)
//	sluice.identity        the decided keys, only when configured (hashed or clear)
//
// A nil *Tracer traces nothing and a nil *Span records nothing: servers
// keep the Tracer nil when tracing is off, so the request path pays a nil
// check and allocates nothing more.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/server/accesslog"
)

// Headers are the W3C trace context's headers (and gRPC metadata keys):
// what a server must keep of a request for its span's parent.
var Headers = []string{"traceparent", "tracestate"}

// Config configures a Tracer. Empty fields take the OTEL_* variables'
// values, else the defaults said.
type Config struct {
	// Server is the server's default service name (sluice-rls,
	// sluice-gateway), under OTEL_SERVICE_NAME and ServiceName.
	Server string
	// Protocol is the OTLP transport: grpc, or http/protobuf (http is
	// the same). Empty: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. The endpoint and
	// the rest are the exporters' OTEL_EXPORTER_OTLP_* variables.
	Protocol string
	// ServiceName, ServiceNamespace and ServiceInstanceID, when set, are
	// the resource's service.name, service.namespace and
	// service.instance.id, over OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES. Without either, service.instance.id is a
	// random UUID.
	ServiceName, ServiceNamespace, ServiceInstanceID string
	// SamplingRate, in [0, 1], samples that fraction of the traces this
	// server starts, and those whose caller sampled (parent based).
	// Negative: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else
	// every trace (parentbased_always_on).
	SamplingRate float64
	// Identity is what spans say of the caller, as the access log's
	// lines do (servers parse it with accesslog.ParseIdentityOr(s,
	// accesslog.None): none unless configured); Hasher hashes it when
	// accesslog.Hashed (nil: a key drawn per process).
	Identity accesslog.Identity
	Hasher   *accesslog.Hasher
	// Logger receives the exporter's errors. Nil discards them.
	Logger *slog.Logger
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
}

// Tracer makes the spans of one server. Its methods are safe for
// concurrent use; those of a nil *Tracer do nothing.
type Tracer struct {
	tp       *sdktrace.TracerProvider
	tr       trace.Tracer
	prop     propagation.TraceContext
	identity accesslog.Identity
	hasher   *accesslog.Hasher
	protocol string
}

// ParseProtocol parses an OTLP protocol: grpc, or http/protobuf (or http).
func ParseProtocol(s string) (string, error) {
	switch strings.ToLower(s) {
	case "grpc":
		return "grpc", nil
	case "http", "http/protobuf":
		return "http/protobuf", nil
	}
	return "", fmt.Errorf("OTLP protocol %q: want grpc or http/protobuf (http/json is not supported)", s)
}

// New starts a Tracer exporting to the OTLP endpoint the environment
// names (the exporters connect lazily: a collector down at start is
// retried, its spans dropped past the batch queue).
func New(ctx context.Context, c Config) (*Tracer, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	proto := c.Protocol
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if proto == "" {
			proto = getenv(v)
		}
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	proto, err := ParseProtocol(proto)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if c.SamplingRate > 1 || c.SamplingRate != c.SamplingRate {
		return nil, fmt.Errorf("tracing: sampling rate %v: want 0 to 1", c.SamplingRate)
	}
	res, err := c.resource(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	var exp sdktrace.SpanExporter
	if proto == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if c.SamplingRate >= 0 {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SamplingRate))))
	}
	if log := c.Logger; log != nil {
		// The SDK's errors (an export that failed) go through its one
		// handler: one line a failed batch at most.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: export", "err", err) }))
	}
	t := &Tracer{tp: sdktrace.NewTracerProvider(opts...), identity: c.Identity, hasher: c.Hasher, protocol: proto}
	t.tr = t.tp.Tracer("github.com/sluicehq/sluice")
	if t.identity == accesslog.Hashed && t.hasher == nil {
		if t.hasher, err = accesslog.NewHasher(nil); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
	}
	return t, nil
}

// resource is the service's: defaults, then OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, then c's fields (each later one wins).
func (c Config) resource(ctx context.Context) (*resource.Resource, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80 // a version 4 UUID
	h := hex.EncodeToString(id[:])
	defaults := []attribute.KeyValue{attribute.String("service.name", c.Server),
		attribute.String("service.instance.id", h[:8]+"-"+h[8:12]+"-"+h[12:16]+"-"+h[16:20]+"-"+h[20:])}
	var set []attribute.KeyValue
	for _, kv := range []struct{ k, v string }{{"service.name", c.ServiceName}, {"service.namespace", c.ServiceNamespace},
		{"service.instance.id", c.ServiceInstanceID}} {
		if kv.v != "" {
			set = append(set, attribute.String(kv.k, kv.v))
		}
	}
	return resource.New(ctx, resource.WithAttributes(defaults...), resource.WithTelemetrySDK(), resource.WithFromEnv(),
		resource.WithAttributes(set...))
}

// Protocol is the OTLP protocol the Tracer exports with, for the start
// line; "" for a nil Tracer.
func (t *Tracer) Protocol() string {
	if t == nil {
		return ""
	}
	return t.protocol
}

// Shutdown exports the spans waiting and stops the exporter, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Span is one request's span and the decisions recorded on it. It is
// for the request's goroutine (not safe for concurrent use); the methods
// of a nil *Span do nothing.
type Span struct {
	t                           *Tracer
	s                           trace.Span
	rules, outcomes, identities []string
	decision                    string
	store                       time.Duration
}

type spanKey struct{}

// StartCall starts the span of a gRPC call to method (/service/method),
// a child of the caller's context in ctx's incoming metadata (either gRPC
// server's: h2grpc keeps Headers when told to), or else of a remote span
// context already in ctx (ExtractHTTP). The returned context carries the
// span. The Span is nil when the span is not sampled.
func (t *Tracer) StartCall(ctx context.Context, method string) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md["traceparent"]) > 0 {
		ctx = t.prop.Extract(ctx, metadataCarrier(md))
	}
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	return t.start(ctx, strings.TrimPrefix(method, "/"), attribute.String("rpc.system", "grpc"),
		attribute.String("rpc.service", service), attribute.String("rpc.method", name))
}

// ExtractHTTP returns ctx with the remote span context of h's traceparent
// and tracestate, when valid, for a span started later (StartCall).
func (t *Tracer) ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if t == nil {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// StartRequest starts the span of an HTTP request, a child of the
// caller's W3C context in its headers; the request returned carries it
// (FromContext, Inject). The Span is nil when the span is not sampled.
func (t *Tracer) StartRequest(r *http.Request) (*http.Request, *Span) {
	if t == nil {
		return r, nil
	}
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, s := t.start(ctx, r.Method, attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path))
	return r.WithContext(ctx), s
}

func (t *Tracer) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, *Span) {
	ctx, span := t.tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		return ctx, nil
	}
	s := &Span{t: t, s: span}
	return context.WithValue(ctx, spanKey{}, s), s
}

// FromContext is the Span a request's context carries (StartRequest,
// StartCall), or nil.
func FromContext(ctx context.Context) *Span {
	s, _ := ctx.Value(spanKey{}).(*Span)
	return s
}

// Inject writes ctx's span context into h (traceparent, tracestate), for
// the request a server sends on: the upstream continues the trace. It
// does nothing when ctx carries no span.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// SetAttributes adds string attributes (name, value, name, value, …).
func (s *Span) SetAttributes(kv ...string) {
	if s == nil {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		s.s.SetAttributes(attribute.String(kv[i], kv[i+1]))
	}
}

// Decision records one rule's decision: its outcome (accesslog's
// Allowed, Denied, ShadowDenied, StoreError), the key it decided, and the
// time spent in the store for it.
func (s *Span) Decision(rule, outcome, key string, store time.Duration) {
	if s == nil {
		return
	}
	s.rules = append(s.rules, rule)
	s.outcomes = append(s.outcomes, outcome)
	if s.decision == "" || s.decision == accesslog.Allowed {
		s.decision = outcome
	}
	s.store += store
	switch s.t.identity {
	case accesslog.Hashed:
		s.identities = append(s.identities, string(s.t.hasher.Append(make([]byte, 0, accesslog.HashLen), key)))
	case accesslog.Clear:
		s.identities = append(s.identities, key)
	}
}

// StoreTime adds d to the store time of decisions recorded without it
// (the RLS times a call's descriptors together).
func (s *Span) StoreTime(d time.Duration) {
	if s != nil {
		s.store += d
	}
}

// Fail marks the span failed with err (the store could not decide).
func (s *Span) Fail(err error) {
	if s == nil || err == nil {
		return
	}
	s.s.SetStatus(codes.Error, err.Error())
}

// End sets the decisions' attributes and ends the span.
func (s *Span) End() {
	if s == nil {
		return
	}
	if len(s.rules) > 0 {
		s.s.SetAttributes(attribute.StringSlice("sluice.rule", s.rules), attribute.StringSlice("sluice.outcome", s.outcomes),
			attribute.String("sluice.decision", s.decision), attribute.Float64("sluice.store.duration", s.store.Seconds()))
	}
	if len(s.identities) > 0 {
		s.s.SetAttributes(attribute.StringSlice("sluice.identity", s.identities))
	}
	s.s.End()
}

// metadataCarrier reads gRPC metadata as a propagation.TextMapCarrier.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c)[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
