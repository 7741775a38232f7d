package rls_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// benchRequests are requests for 1024 users under a 3-a-minute rule that
// is soon exhausted: the steady state of a limited service (mostly
// OVER_LIMIT, with the same work as OK).
func benchRequests() []*pb.RateLimitRequest {
	reqs := make([]*pb.RateLimitRequest, 1024)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{d("user", "u"+strconv.Itoa(i))}}
	}
	return reqs
}

func benchServer(b *testing.B) *rls.Server {
	cfg, err := rules.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		b.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	b.Cleanup(func() { store.Close() })
	srv, err := rls.New(store, set, rls.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkShouldRateLimit calls the server in process (no gRPC): the cost
// sluice adds to a request.
func BenchmarkShouldRateLimit(b *testing.B) {
	srv := benchServer(b)
	reqs := benchRequests()
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		i := next.Add(1) * 7919
		for p.Next() {
			i++
			if _, err := srv.ShouldRateLimit(context.Background(), reqs[i%uint64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkShouldRateLimitGRPC calls it through gRPC over loopback, as
// Envoy does.
func BenchmarkShouldRateLimitGRPC(b *testing.B) {
	srv := benchServer(b)
	client := pb.NewRateLimitServiceClient(serve(b, srv))
	reqs := benchRequests()
	var next atomic.Uint64
	b.SetParallelism(32) // many calls in flight, as from an Envoy fleet
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		i := next.Add(1) * 7919
		for p.Next() {
			i++
			if _, err := client.ShouldRateLimit(context.Background(), reqs[i%uint64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
