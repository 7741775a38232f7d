package h2grpc_test

import (
	"context"
	"slices"
	"testing"

	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// TestMetadata: the headers Options.Metadata names reach the handler's
// context as incoming metadata (a caller's trace context), and no other;
// without the option, none does.
func TestMetadata(t *testing.T) {
	for _, keep := range [][]string{{"traceparent", "tracestate"}, nil} {
		f := start(t, h2grpc.Options{Metadata: keep})
		var got metadata.MD
		f.svc.unary = func(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			got, _ = metadata.FromIncomingContext(ctx)
			return &testpb.SimpleResponse{}, nil
		}
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"tracestate", "a=1", "other", "x")
		if _, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if keep == nil {
			if got != nil {
				t.Errorf("without Metadata the handler got %v", got)
			}
			continue
		}
		if !slices.Equal(got["traceparent"], []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}) ||
			!slices.Equal(got["tracestate"], []string{"a=1"}) || got["other"] != nil {
			t.Errorf("metadata %v: want traceparent and tracestate only", got)
		}
	}
}
