package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// startXDS serves an ADS management server with a snapshot cache on
// loopback, over TLS when creds is not nil.
func startXDS(t *testing.T, creds credentials.TransportCredentials) (cachev3.SnapshotCache, string) {
	t.Helper()
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	g := grpc.NewServer(opts...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(context.Background(), cache, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return cache, ln.Addr().String()
}

func pushRLS(t *testing.T, cache cachev3.SnapshotCache, node, version string, perHour ...uint32) {
	t.Helper()
	var res []types.Resource
	for _, n := range perHour {
		res = append(res, &rlsconf.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http",
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "httproute/default/backend/rule/0/match/0", Value: "x",
				RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: n}}}})
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// askEG asks as Envoy Gateway's generated config has Envoy ask, and
// returns the code and the limit that applied (0: none).
func askEG(conn *grpc.ClientConn) (pb.RateLimitResponse_Code, uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "default/eg/http", HitsAddend: 1,
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{
			{Key: "httproute/default/backend/rule/0/match/0", Value: "x"}}}}})
	if err != nil {
		return 0, 0, err
	}
	return resp.GetOverallCode(), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), nil
}

// TestRLSXDS: sluice rls --config-type xds, serving mTLS as Envoy Gateway
// runs it and reaching its management server over TLS, answers by the
// configs pushed, updated and withdrawn.
func TestRLSXDS(t *testing.T) {
	x := newRLSTLS(t)
	xdsServer := x.ca.Server("envoy-gateway").TLS()
	cache, xdsAddr := startXDS(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{xdsServer}}))
	caFile, err := x.ca.WriteCA(x.dir, "xds-ca")
	if err != nil {
		t.Fatal(err)
	}
	pushRLS(t, cache, "sluice-1", "v1", 2)
	addr, _, logs := startRLS(t, "--config-type", "GRPC_XDS_SOTW", "--xds-server", xdsAddr, "--xds-node-id", "sluice-1", "--xds-tls-ca", caFile,
		"--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--grpc-tls-cert", x.cert, "--grpc-tls-key", x.key, "--grpc-tls-client-ca", x.clientCA)
	envoy := x.ca.Client("envoy", nil, "spiffe://cluster.local/ns/envoy-gateway-system/sa/envoy")
	conn := dialTLS(t, addr, x.clientCreds(&envoy))

	waitLimit := func(want uint32) { t.Helper(); waitEGLimit(t, conn, want, logs) }
	waitLimit(2) // one hit used
	if code, _, err := askEG(conn); err != nil || code != pb.RateLimitResponse_OK {
		t.Fatalf("second hit: %v, %v", code, err)
	}
	if code, _, err := askEG(conn); err != nil || code != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("third hit: %v, %v; want OVER_LIMIT", code, err)
	}
	pushRLS(t, cache, "sluice-1", "v2", 100)
	waitLimit(100)
	pushRLS(t, cache, "sluice-1", "v3")
	waitLimit(0)
	if !contains(logs.String(), "config_type=xds") || !contains(logs.String(), "xds: config loaded") {
		t.Errorf("logs lack config_type=xds or a load:\n%s", logs)
	}
}

func TestRLSXDSUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--config-type", "xds"},
		{"--config-type", "xds", "--xds-server", "127.0.0.1:1", "--config-dir", "x"},
		{"--config-type", "consul"},
		{"--xds-server", "127.0.0.1:1"},
		{"--config-type", "xds", "--xds-server", "127.0.0.1:1", "--xds-tls-cert", "c"},
	} {
		if _, _, err := parseRLSFlags(args, discard{}); err == nil {
			t.Errorf("%q: no usage error", args)
		}
	}
}

// TestRLSUpstreamEnvXDS: Envoy Gateway's deployment, with nothing but
// envoyproxy/ratelimit's environment, as Envoy Gateway sets it: rules from
// an xDS management server over TLS, gRPC served over mTLS, and a
// go-control-plane client's answers following the pushed configs.
func TestRLSUpstreamEnvXDS(t *testing.T) {
	x := newRLSTLS(t)
	xdsServer := x.ca.Server("envoy-gateway").TLS()
	cache, xdsAddr := startXDS(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{xdsServer}}))
	caFile, err := x.ca.WriteCA(x.dir, "xds-ca")
	if err != nil {
		t.Fatal(err)
	}
	pushRLS(t, cache, "sluice-env", "v1", 2)
	for k, v := range map[string]string{
		"HOST": "127.0.0.1", "PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0",
		"LOG_LEVEL":           "info",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": x.cert, "GRPC_SERVER_TLS_KEY": x.key,
		"GRPC_CLIENT_TLS_CACERT":            x.clientCA,
		"CONFIG_TYPE":                       "GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL":        xdsAddr,
		"CONFIG_GRPC_XDS_NODE_ID":           "sluice-env",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS":    "true",
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": caFile,
	} {
		t.Setenv(k, v)
	}
	addr, _, logs := startRLS(t) // no flags at all
	envoy := x.ca.Client("envoy", nil, "spiffe://cluster.local/ns/envoy-gateway-system/sa/envoy")
	conn := dialTLS(t, addr, x.clientCreds(&envoy))
	waitLimit := func(want uint32) { t.Helper(); waitEGLimit(t, conn, want, logs) }
	waitLimit(2)
	if code, _, err := askEG(conn); err != nil || code != pb.RateLimitResponse_OK {
		t.Fatalf("second hit: %v, %v", code, err)
	}
	if code, _, err := askEG(conn); err != nil || code != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("third hit: %v, %v; want OVER_LIMIT", code, err)
	}
	pushRLS(t, cache, "sluice-env", "v2", 100)
	waitLimit(100)
	// mTLS from GRPC_CLIENT_TLS_CACERT: a client without a certificate
	// gets nothing.
	bare := dialTLS(t, addr, x.clientCreds(nil))
	if _, _, err := askEG(bare); err == nil {
		t.Error("a client without a certificate was answered")
	}
	if !strings.Contains(logs.String(), "grpc_tls=mtls") || !strings.Contains(logs.String(), "config_type=xds") {
		t.Errorf("logs do not show mTLS and xDS:\n%s", logs)
	}
}

// waitEGLimit asks until the answer's limit is want, for at most a minute
// (a bound, not a timing assertion): pushed configs apply asynchronously.
func waitEGLimit(t *testing.T, conn *grpc.ClientConn, want uint32, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, limit, err := askEG(conn)
		if err == nil && limit == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("limit %d (%v), want %d within a minute\n%s", limit, err, want, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
