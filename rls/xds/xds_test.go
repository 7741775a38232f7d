package xds_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rls/xds"
	"github.com/sluicehq/sluice/rules"
)

// controlPlane is an in-process go-control-plane ADS server with a
// snapshot cache, recording the NACKs it receives.
type controlPlane struct {
	cache cachev3.SnapshotCache
	addr  string

	mu      sync.Mutex
	nacks   []string
	acked   []string
	headers []metadata.MD  // of each stream opened
	nodes   []*corev3.Node // of each request
}

func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cp := &controlPlane{cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.headers = append(cp.headers, md)
		return nil
	}, StreamRequestFunc: func(_ int64, req *discoverygrpc.DiscoveryRequest) error {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		if n := req.GetNode(); n != nil {
			cp.nodes = append(cp.nodes, n)
		}
		if req.GetErrorDetail() != nil {
			cp.nacks = append(cp.nacks, req.GetErrorDetail().GetMessage())
		} else if req.GetResponseNonce() != "" {
			cp.acked = append(cp.acked, req.GetVersionInfo())
		}
		return nil
	}}
	srv := serverv3.NewServer(t.Context(), cp.cache, cb)
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp.addr = ln.Addr().String()
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return cp
}

// push sets node's snapshot to version with cfgs.
func (cp *controlPlane) push(t *testing.T, node, version string, cfgs ...*rlsconf.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(cfgs))
	for i, c := range cfgs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

func (cp *controlPlane) nackCount() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return len(cp.nacks)
}

func limitConfig(name, domain, value string, perMinute uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: "api_key", Value: value,
		RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute, Name: name + "-limit"},
	}}}
}

// waitFor polls cond, bounded by a minute (not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// runClient makes a client of o for target (with fast retries unless o
// sets them), runs it until the test ends, and returns it.
func runClient(t *testing.T, target xds.Target, o xds.Options) *xds.Client {
	t.Helper()
	if o.RetryMin == 0 {
		o.RetryMin, o.RetryMax = 10*time.Millisecond, 100*time.Millisecond
	}
	client, err := xds.New(target, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- client.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return client
}

// rlsOver serves an rls.Server with no rules over gRPC and returns it and
// a client of it.
func rlsOver(t *testing.T) (*rls.Server, pb.RateLimitServiceClient) {
	t.Helper()
	empty, _ := rules.NewSet()
	srv, err := rls.New(memstore.New(memstore.Options{}), empty, rls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, pb.NewRateLimitServiceClient(conn)
}

// ask sends one request for api_key=value in domain and returns the code
// and the limit that applied (0 if none).
func ask(t *testing.T, c pb.RateLimitServiceClient, domain, value string) (pb.RateLimitResponse_Code, uint32) {
	t.Helper()
	resp, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: domain, HitsAddend: 1,
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "api_key", Value: value}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetOverallCode(), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

// TestPushUpdateWithdraw: the rls answers by what the management server
// pushes: a first config, an update and a second domain, a bad push
// refused (NACK) with the last good config still answering, a withdrawn
// domain, and none at all.
func TestPushUpdateWithdraw(t *testing.T) {
	cp := startControlPlane(t)
	srv, rl := rlsOver(t)
	client := runClient(t, srv, xds.Options{Server: cp.addr, NodeID: "sluice-test"})
	version := func(v string) func() bool { return func() bool { return client.Status().Version == v } }

	cp.push(t, "sluice-test", "1", limitConfig("edge", "edge", "k1", 2))
	waitFor(t, "version 1", version("1"))
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if code, limit := ask(t, rl, "edge", "k1"); code != want || limit != 2 {
			t.Fatalf("v1 request %d: %v (limit %d), want %v (2)", i, code, limit, want)
		}
	}
	if !client.Loaded() {
		t.Fatal("not Loaded after a config")
	}

	// An update of edge, and a second domain.
	cp.push(t, "sluice-test", "2", limitConfig("edge", "edge", "k1", 50), limitConfig("admin", "admin", "root", 1))
	waitFor(t, "version 2", version("2"))
	if code, limit := ask(t, rl, "edge", "k1"); code != pb.RateLimitResponse_OK || limit != 50 {
		t.Fatalf("v2 edge: %v (limit %d), want OK (50)", code, limit)
	}
	if code, limit := ask(t, rl, "admin", "root"); code != pb.RateLimitResponse_OK || limit != 1 {
		t.Fatalf("v2 admin: %v (limit %d), want OK (1)", code, limit)
	}
	if code, _ := ask(t, rl, "admin", "root"); code != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("v2 admin, second: %v, want OVER_LIMIT", code)
	}
	if st := client.Status(); fmt.Sprint(st.Resources) != "[admin edge]" {
		t.Fatalf("resources %v, want [admin edge]", st.Resources)
	}

	// A bad push: a unit the proto does not know, and two configs for one
	// domain. Refused, the server told why, version 2 still answering.
	bad := limitConfig("broken", "broken", "x", 1)
	bad.Descriptors[0].RateLimit.Unit = 42
	cp.push(t, "sluice-test", "3", limitConfig("edge", "edge", "k1", 50), bad, limitConfig("edge-again", "edge", "k2", 1))
	waitFor(t, "a NACK", func() bool { return cp.nackCount() > 0 })
	st := client.Status()
	if st.Version != "2" || !strings.Contains(st.LastError, "xds:broken") || !strings.Contains(st.LastError, "duplicate domain") {
		t.Fatalf("after a bad push: version %q, error %q; want 2 kept and both problems", st.Version, st.LastError)
	}
	cp.mu.Lock()
	nack := cp.nacks[0]
	cp.mu.Unlock()
	if !strings.Contains(nack, "unit") {
		t.Fatalf("NACK message %q does not name the unit", nack)
	}
	if code, limit := ask(t, rl, "admin", "root"); code != pb.RateLimitResponse_OVER_LIMIT || limit != 1 {
		t.Fatalf("after a refused push, admin: %v (limit %d), want OVER_LIMIT (1) from version 2", code, limit)
	}

	// Withdraw admin.
	cp.push(t, "sluice-test", "4", limitConfig("edge", "edge", "k1", 50))
	waitFor(t, "version 4", version("4"))
	if code, limit := ask(t, rl, "admin", "root"); code != pb.RateLimitResponse_OK || limit != 0 {
		t.Fatalf("admin withdrawn: %v (limit %d), want OK with no limit", code, limit)
	}
	if d := srv.Rules().Domains(); fmt.Sprint(d) != "[edge]" {
		t.Fatalf("domains %v, want [edge]", d)
	}

	// Withdraw everything.
	cp.push(t, "sluice-test", "5")
	waitFor(t, "version 5", version("5"))
	if d := srv.Rules().Domains(); len(d) != 0 {
		t.Fatalf("domains %v, want none", d)
	}
	if code, limit := ask(t, rl, "edge", "k1"); code != pb.RateLimitResponse_OK || limit != 0 {
		t.Fatalf("all withdrawn: %v (limit %d), want OK with no limit", code, limit)
	}
}

// TestReconnect: the client reconnects to a management server that went
// away and came back at the same address, and takes its new config; the
// previous one answers meanwhile.
func TestReconnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(cache cachev3.SnapshotCache, ln net.Listener) *grpc.Server {
		g := grpc.NewServer()
		discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(t.Context(), cache, nil))
		go g.Serve(ln)
		return g
	}
	cache1 := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	cp := &controlPlane{cache: cache1}
	cp.push(t, "default", "a", limitConfig("edge", "edge", "k1", 7))
	g1 := serve(cache1, ln)

	srv, rl := rlsOver(t)
	client := runClient(t, srv, xds.Options{Server: addr, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	waitFor(t, "version a", func() bool { return client.Status().Version == "a" })
	g1.Stop()
	waitFor(t, "the stream to end", func() bool { return !client.Status().Connected })
	if _, limit := ask(t, rl, "edge", "k1"); limit != 7 {
		t.Fatalf("with the server gone: limit %d, want 7 (kept)", limit)
	}

	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	cache2 := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	cp2 := &controlPlane{cache: cache2}
	cp2.push(t, "default", "b", limitConfig("edge", "edge", "k1", 9))
	g2 := serve(cache2, ln2)
	defer g2.Stop()
	waitFor(t, "version b", func() bool { return client.Status().Version == "b" })
	if _, limit := ask(t, rl, "edge", "k1"); limit != 9 {
		t.Fatalf("after reconnecting: limit %d, want 9", limit)
	}
}

// bigConfig is a RateLimitConfig of n descriptors with values of about
// 100 bytes each: about n×130 bytes on the wire.
func bigConfig(name, domain string, n int) *rlsconf.RateLimitConfig {
	rc := &rlsconf.RateLimitConfig{Name: name, Domain: domain}
	for i := range n {
		rc.Descriptors = append(rc.Descriptors, &rlsconf.RateLimitDescriptor{
			Key: "api_key", Value: fmt.Sprintf("%08d-%s", i, strings.Repeat("v", 90)),
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 5},
		})
	}
	return rc
}

// TestOversizedResponse: a response past MaxMsgSize cannot be read, so it
// cannot be NACKed; the client counts it refused, says why in Status, keeps
// the rules in use, and takes the next response that fits.
func TestOversizedResponse(t *testing.T) {
	cp := startControlPlane(t)
	srv, rl := rlsOver(t)
	client := runClient(t, srv, xds.Options{Server: cp.addr, NodeID: "n", MaxMsgSize: 64 << 10})
	reg := prometheus.NewPedanticRegistry()
	if err := client.Register(reg); err != nil {
		t.Fatal(err)
	}

	cp.push(t, "n", "1", limitConfig("edge", "edge", "k1", 2))
	waitFor(t, "version 1", func() bool { return client.Status().Version == "1" })
	cp.push(t, "n", "2", bigConfig("edge", "edge", 2000)) // ~260 KiB
	waitFor(t, "the oversized response refused", func() bool { return client.Status().LastError != "" })
	st := client.Status()
	if st.Version != "1" || !strings.Contains(st.LastError, "larger than the client's limit of 65536 bytes") {
		t.Fatalf("after an oversized push: version %q, error %q; want 1 kept and the limit named", st.Version, st.LastError)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	refused := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "sluice_xds_updates_refused_total" {
			refused = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if refused < 1 {
		t.Fatalf("sluice_xds_updates_refused_total %v, want at least 1", refused)
	}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if code, limit := ask(t, rl, "edge", "k1"); code != want || limit != 2 {
			t.Fatalf("kept v1, request %d: %v (limit %d), want %v (2)", i, code, limit, want)
		}
	}
	cp.push(t, "n", "3", bigConfig("edge", "edge", 100)) // ~13 KiB
	waitFor(t, "version 3", func() bool { return client.Status().Version == "3" })
	if st := client.Status(); st.LastError != "" {
		t.Fatalf("after a good push, LastError %q", st.LastError)
	}
}
