package rls_test

import (
	"context"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// FuzzShouldRateLimit feeds arbitrary wire-format requests to the server:
// it answers each with a response of one status per descriptor, or with
// InvalidArgument, and never panics.
func FuzzShouldRateLimit(f *testing.F) {
	seed := func(r *pb.RateLimitRequest) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{d("user", "u")}})
	seed(&pb.RateLimitRequest{Domain: "test", HitsAddend: 7, Descriptors: []*commonpb.RateLimitDescriptor{
		d("tenant", "acme", "user", "u"), withHits(d("path", "/api/x"), 0), d("specific", "s"), d("general", "g"),
	}})
	o := d("user", "o")
	o.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typepb.RateLimitUnit_HOUR, UnitMultiplier: wrapperspb.UInt32(2)}
	seed(&pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{o, d("free", "f"), d("blocked", "b")}})
	seed(&pb.RateLimitRequest{})

	cfg, err := rules.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		f.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	f.Cleanup(func() { store.Close() })
	srv, err := rls.New(store, set, rls.Options{Headers: header.IETF})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req pb.RateLimitRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			return
		}
		resp, err := srv.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("ShouldRateLimit(%v) = %v, want a response or InvalidArgument", &req, err)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
	})
}
