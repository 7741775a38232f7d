package rls_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit/header"
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
	return benchServerOpts(b, rls.Options{Headers: header.Off})
}

func benchServerOpts(b testing.TB, opts rls.Options) *rls.Server {
	cfg, err := rules.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		b.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	b.Cleanup(func() { store.Close() })
	srv, err := rls.New(store, set, opts)
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
	runParallel(b, reqs, func(r *pb.RateLimitRequest) error {
		_, err := srv.ShouldRateLimit(context.Background(), r)
		return err
	})
}

// BenchmarkShouldRateLimitGRPC calls it through gRPC over loopback, as
// Envoy does.
func BenchmarkShouldRateLimitGRPC(b *testing.B) {
	srv := benchServer(b)
	client := pb.NewRateLimitServiceClient(serve(b, srv))
	reqs := benchRequests()
	b.SetParallelism(32) // many calls in flight, as from an Envoy fleet
	runParallel(b, reqs, func(r *pb.RateLimitRequest) error {
		_, err := client.ShouldRateLimit(context.Background(), r)
		return err
	})
}

// BenchmarkShouldRateLimitCodec is the server's hot path short of the
// transport: unmarshal the request as gRPC's codec does, decide, marshal
// the response.
func BenchmarkShouldRateLimitCodec(b *testing.B) {
	srv := benchServer(b)
	runWire(b, func(msg, out []byte) ([]byte, error) {
		req := &pb.RateLimitRequest{}
		if err := proto.Unmarshal(msg, req); err != nil {
			return nil, err
		}
		resp, err := srv.ShouldRateLimit(context.Background(), req)
		if err != nil {
			return nil, err
		}
		return (proto.MarshalOptions{}).MarshalAppend(out, resp)
	})
}

// BenchmarkShouldRateLimit3 decides requests of three descriptors (two
// limited by different rules, one matching no rule), in process.
func BenchmarkShouldRateLimit3(b *testing.B) {
	srv := benchServer(b)
	reqs := make([]*pb.RateLimitRequest, 1024)
	for i := range reqs {
		u := "u" + strconv.Itoa(i)
		reqs[i] = &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{
			d("user", u), d("detailed", strconv.Itoa(i%256)), d("nobody", u),
		}}
	}
	runParallel(b, reqs, func(r *pb.RateLimitRequest) error {
		_, err := srv.ShouldRateLimit(context.Background(), r)
		return err
	})
}

// runParallel times call on reqs from b's parallel goroutines, each
// walking the requests from its own place.
func runParallel(b *testing.B, reqs []*pb.RateLimitRequest, call func(*pb.RateLimitRequest) error) {
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		i := next.Add(1) * 7919
		for p.Next() {
			i++
			if err := call(reqs[i%uint64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkShouldRateLimitHandler is the call as the lean gRPC server
// makes it, short of HTTP/2: the request decoded by ShouldRateLimit's
// handler as Register adds it, decided, and the answer encoded.
func BenchmarkShouldRateLimitHandler(b *testing.B) {
	srv := benchServer(b)
	var reg registered
	srv.Register(&reg)
	h := reg.desc.Methods[0].Handler
	runWire(b, func(msg, out []byte) ([]byte, error) {
		resp, err := h(reg.impl, context.Background(), func(v any) error {
			if u, ok := v.(interface{ UnmarshalWire([]byte) error }); ok {
				return u.UnmarshalWire(msg)
			}
			return proto.Unmarshal(msg, v.(proto.Message))
		}, nil)
		if err != nil {
			return nil, err
		}
		if w, ok := resp.(interface{ AppendWire([]byte) ([]byte, error) }); ok {
			return w.AppendWire(out)
		}
		return (proto.MarshalOptions{}).MarshalAppend(out, resp.(proto.Message))
	})
}

// runWire times call on benchRequests' wire forms from b's parallel
// goroutines, each walking them from its own place and appending the
// answers to a buffer of its own.
func runWire(b *testing.B, call func(msg, out []byte) ([]byte, error)) {
	wire := marshalAll(b, benchRequests())
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		i := next.Add(1) * 7919
		var out []byte
		for p.Next() {
			i++
			var err error
			if out, err = call(wire[i%uint64(len(wire))], out[:0]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// marshalAll returns reqs in their wire form.
func marshalAll(b *testing.B, reqs []*pb.RateLimitRequest) [][]byte {
	wire := make([][]byte, len(reqs))
	for i, r := range reqs {
		var err error
		if wire[i], err = proto.Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
	return wire
}
