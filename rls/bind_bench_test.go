package rls_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// applyOnly is a store with its ratelimit.Binder hidden: a server on it
// decides every descriptor with Apply, as before rules.Set.Bind.
type applyOnly struct{ ratelimit.Store }

// BenchmarkShouldRateLimitBindPaired is BenchmarkShouldRateLimit (one
// descriptor) and BenchmarkShouldRateLimit3 (three) in process, on a
// server whose rules are bound to the memory store and on one deciding by
// Apply, in one goroutine, in alternating blocks of 256 requests; it
// reports the fastest block of each per request and their ratio (see
// rules.BenchmarkResolveDecidePaired).
func BenchmarkShouldRateLimitBindPaired(b *testing.B) {
	one := benchRequests()
	three := make([]*pb.RateLimitRequest, 1024)
	for i := range three {
		u := "u" + strconv.Itoa(i)
		three[i] = &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{
			d("user", u), d("detailed", strconv.Itoa(i%256)), d("nobody", u),
		}}
	}
	for _, tc := range []struct {
		name string
		reqs []*pb.RateLimitRequest
	}{{"one", one}, {"three", three}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := rules.Parse("test.yaml", []byte(testConfig))
			if err != nil {
				b.Fatal(err)
			}
			set, _ := rules.NewSet(cfg)
			store := memstore.New(memstore.Options{})
			defer store.Close()
			bound, err := rls.New(store, set, rls.Options{Headers: header.Off})
			if err != nil {
				b.Fatal(err)
			}
			applied, err := rls.New(applyOnly{store}, set, rls.Options{Headers: header.Off})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			i := 0
			block := func(s *rls.Server) time.Duration {
				t0 := time.Now()
				for range 256 {
					i = (i + 1) % len(tc.reqs)
					if _, err := s.ShouldRateLimit(ctx, tc.reqs[i]); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t0)
			}
			minA, minB := time.Duration(1<<62), time.Duration(1<<62)
			b.ReportAllocs()
			for b.Loop() {
				minA = min(minA, block(applied))
				minB = min(minB, block(bound))
			}
			b.ReportMetric(float64(minA)/256, "apply-ns/op")
			b.ReportMetric(float64(minB)/256, "bound-ns/op")
			b.ReportMetric(float64(minB)/float64(minA), "bound/apply")
		})
	}
}
