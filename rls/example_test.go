package rls_test

import (
	"context"
	"fmt"
	"net"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// An envoyproxy/ratelimit config served over gRPC on loopback, asked by a
// client built from go-control-plane's types, as Envoy asks.
func Example() {
	cfg, err := rules.Parse("config.yaml", []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 2
`))
	if err != nil {
		panic(err)
	}
	set, _ := rules.NewSet(cfg)

	// A fixed clock keeps the output stable; servers use the real one.
	now := func() time.Time { return time.Date(2026, 1, 1, 12, 0, 15, 0, time.UTC) }
	store := memstore.New(memstore.Options{Now: now})
	defer store.Close()
	srv, err := rls.New(store, set, rls.Options{Now: now})
	if err != nil {
		panic(err)
	}

	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	g := grpc.NewServer()
	srv.Register(g)
	go g.Serve(lis)
	defer g.Stop()

	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)

	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{{
		Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.7"}},
	}}}
	for range 3 {
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		s := resp.Statuses[0]
		fmt.Println(resp.OverallCode, s.LimitRemaining, s.DurationUntilReset.AsDuration())
	}
	// Output:
	// OK 1 45s
	// OK 0 45s
	// OVER_LIMIT 0 45s
}

// Watch keeps a directory's configuration current; an invalid edit is
// logged and the last good configuration stays.
func ExampleServer_Watch() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	srv, _ := rls.New(store, nil, rls.Options{})
	dir := exampleDir()
	if err := srv.Load(dir); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Watch(ctx, dir, time.Second)
	fmt.Println(srv.Rules().Domains())
	// Output: [edge]
}

func exampleDir() string { return "../examples/rls/config" }
