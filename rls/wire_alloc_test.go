package rls_test

import (
	"context"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
)

// registered keeps the rate limit service a Register call adds.
type registered struct {
	desc *grpc.ServiceDesc
	impl any
}

func (r *registered) RegisterService(d *grpc.ServiceDesc, impl any) {
	if d.ServiceName == pb.RateLimitService_ServiceDesc.ServiceName {
		r.desc, r.impl = d, impl
	}
}

// TestRegisteredHandlerAllocs calls ShouldRateLimit's handler as Register
// adds it, decoding as the lean gRPC server does (a type that decodes
// itself, else proto.Unmarshal): a request of one descriptor costs at
// most 4 allocations in all, decoding and deciding (with the generated
// handler and proto.Unmarshal it was 10: 8 of them the request's
// messages and strings).
func TestRegisteredHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under the race detector")
	}
	srv := benchServerOpts(t, rls.Options{Headers: header.Off})
	var reg registered
	srv.Register(&reg)
	if reg.desc == nil || len(reg.desc.Methods) != 1 || reg.desc.Methods[0].MethodName != "ShouldRateLimit" {
		t.Fatalf("Register added %+v", reg.desc)
	}
	wire, err := proto.Marshal(&pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{d("user", "alice")}})
	if err != nil {
		t.Fatal(err)
	}
	dec := func(v any) error {
		if u, ok := v.(interface{ UnmarshalWire([]byte) error }); ok {
			return u.UnmarshalWire(wire)
		}
		return proto.Unmarshal(wire, v.(proto.Message))
	}
	h := reg.desc.Methods[0].Handler
	call := func() {
		resp, err := h(reg.impl, context.Background(), dec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := resp.(proto.Message); !ok {
			t.Fatalf("handler answered %T, not a protocol buffers message", resp)
		}
	}
	call()
	if n := testing.AllocsPerRun(200, call); n > 4 {
		t.Errorf("ShouldRateLimit's handler: %.1f allocations a call, want at most 4", n)
	}
}
