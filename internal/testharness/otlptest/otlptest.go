// Package otlptest is an in-process OTLP trace receiver for tests: the
// collector's gRPC TraceService and HTTP's POST /v1/traces (protobuf),
// both on 127.0.0.1, keeping every span they are sent.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a span received, its IDs in lower-case hex and its attributes
// (and its resource's) as strings: an array's elements joined by ",".
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          int32
	Attrs, Resource               map[string]string
	StatusCode                    int32
}

// Receiver receives spans over OTLP/gRPC at GRPCAddr and OTLP/HTTP at
// HTTPURL (append /v1/traces, or set it as OTEL_EXPORTER_OTLP_ENDPOINT).
type Receiver struct {
	GRPCAddr string // host:port
	HTTPURL  string // http://host:port

	discard atomic.Bool // Discard: count, keep nothing
	counted atomic.Int64

	mu      sync.Mutex
	spans   []Span
	changed chan struct{}
	// Requests counts the export requests received, by transport.
	grpcReqs, httpReqs int
}

// Start starts a Receiver, stopped when t ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		t.Fatal(err)
	}
	g := grpc.NewServer()
	collpb.RegisterTraceServiceServer(g, grpcService{r: r})
	go g.Serve(gl)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(hl)
	r.GRPCAddr, r.HTTPURL = gl.Addr().String(), "http://"+hl.Addr().String()
	t.Cleanup(func() {
		g.Stop()
		hs.Close()
	})
	return r
}

type grpcService struct {
	collpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s grpcService) Export(_ context.Context, req *collpb.ExportTraceServiceRequest) (*collpb.ExportTraceServiceResponse, error) {
	s.r.add(req, true)
	return &collpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m collpb.ExportTraceServiceRequest
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, not "+ct, http.StatusUnsupportedMediaType)
		return
	}
	if err := proto.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&m, false)
	out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Discard has the receiver decode and count the spans it is sent, and
// keep none: a collector's cost, for benchmarks (Count).
func (r *Receiver) Discard() { r.discard.Store(true) }

// Count is the spans received while discarding.
func (r *Receiver) Count() int64 { return r.counted.Load() }

func (r *Receiver) add(req *collpb.ExportTraceServiceRequest, grpc bool) {
	if r.discard.Load() {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.counted.Add(int64(len(ss.GetSpans())))
			}
		}
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: int32(s.GetKind()),
					Attrs: attrs(s.GetAttributes()), Resource: res, StatusCode: int32(s.GetStatus().GetCode())})
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if grpc {
		r.grpcReqs++
	} else {
		r.httpReqs++
	}
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
}

// Requests returns the export requests received over gRPC and HTTP.
func (r *Receiver) Requests() (grpc, http int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grpcReqs, r.httpReqs
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait returns the first span of trace traceID received within timeout
// (a bound, not a measure), failing t without one.
func (r *Receiver) Wait(t testing.TB, traceID string, timeout time.Duration) Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		changed := r.changed
		for _, s := range r.spans {
			if s.TraceID == traceID {
				r.mu.Unlock()
				return s
			}
		}
		n := len(r.spans)
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no span of trace %s within %v (%d spans received: %v)", traceID, timeout, n, r.Spans())
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, value(e))
		}
		return strings.Join(parts, ",")
	}
	return ""
}
