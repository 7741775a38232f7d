package rls_test

import (
	"context"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/internal/testharness/otlptest"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
)

// BenchmarkShouldRateLimitTracing is BenchmarkShouldRateLimit with
// tracing on, exporting over OTLP/HTTP to an in-process receiver that
// decodes and counts the spans (its work counted too, as a collector's
// beside the server would be): sampled, each call the child of a
// caller's sampled traceparent in its metadata, as a traced Envoy sends;
// and unsampled (sampling rate 0, no parent): the cost of tracing on when
// a call is not traced. With tracing off it is BenchmarkShouldRateLimit.
func BenchmarkShouldRateLimitTracing(b *testing.B) {
	for _, tc := range []struct {
		name   string
		rate   float64
		parent bool
	}{{"sampled", 1, true}, {"unsampled", 0, false}} {
		b.Run(tc.name, func(b *testing.B) {
			rcv := otlptest.Start(b)
			rcv.Discard()
			b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.HTTPURL)
			tr, err := tracing.New(context.Background(), tracing.Config{Server: "bench", SamplingRate: tc.rate})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			srv := benchServerOpts(b, rls.Options{Headers: header.Off, Tracer: tr})
			ctx := context.Background()
			if tc.parent {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
			}
			runParallel(b, benchRequests(), func(r *pb.RateLimitRequest) error {
				_, err := srv.ShouldRateLimit(ctx, r)
				return err
			})
		})
	}
}
