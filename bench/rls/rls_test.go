package rls_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	sluicerls "github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// TestAgreement is the benchmark's correctness check: envoyproxy/ratelimit
// (built from its Go module) and sluice rls, on one redis-server, answer
// one stream identically. It builds envoyproxy/ratelimit once into the user
// cache directory, which takes a minute or two the first time.
func TestAgreement(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs envoyproxy/ratelimit")
	}
	redistest.Require(t)
	ctx := context.Background()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	binDir := filepath.Join(cache, "sluice-bench", "envoy-ratelimit-"+rls.EnvoyVersion)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	envoyBin, err := rls.BuildEnvoy(ctx, binDir)
	if err != nil {
		if os.Getenv("CI") != "true" {
			t.Skipf("cannot build envoyproxy/ratelimit (no module proxy?): %v", err)
		}
		t.Fatal(err)
	}
	work := t.TempDir()
	sluiceBin, err := rls.BuildSluice(ctx, filepath.Join("..", ".."), work)
	if err != nil {
		t.Fatal(err)
	}
	r := redistest.Start(t)
	cfg, _ := filepath.Abs("config")
	envoy, err := rls.StartEnvoy(ctx, envoyBin, cfg, filepath.Join(work, "envoy"), r.Addr, rls.EnvoyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer envoy.Stop()
	sluice, err := rls.StartSluice(ctx, sluiceBin, cfg, r.URL(), "--store-timeout", "10s")
	if err != nil {
		t.Fatal(err)
	}
	defer sluice.Stop()

	dial := func(addr string) pb.RateLimitServiceClient {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return pb.NewRateLimitServiceClient(c)
	}
	e, s := dial(envoy.Addr), dial(sluice.Addr)
	// Fixed windows of a minute and less: run inside one minute, and again
	// in the next one when a run straddles a boundary (at most twice more).
	for attempt := range 3 {
		now := time.Now()
		if now.Second() > 40 {
			time.Sleep(now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now))
		}
		start := time.Now()
		ag, err := rls.Agree(ctx, e, s, rls.Stream(uint64(attempt+1), 1000, strconv.FormatInt(start.UnixNano(), 36)))
		if err != nil {
			t.Fatal(err)
		}
		if !time.Now().Truncate(time.Minute).Equal(start.Truncate(time.Minute)) {
			t.Logf("run %d straddled a minute boundary; again", attempt+1)
			continue
		}
		t.Logf("%+v", ag)
		if ag.Disagree != 0 {
			t.Fatalf("%d of %d requests disagree; first: %s", ag.Disagree, ag.Requests, ag.First)
		}
		if ag.OverLimit == 0 || ag.OverLimit == ag.Descriptors {
			t.Errorf("the stream is degenerate: %d of %d descriptors over the limit", ag.OverLimit, ag.Descriptors)
		}
		return
	}
	t.Fatal("every run straddled a minute boundary")
}

func TestMain(m *testing.M) { redistest.Main(m) }

// TestRawConn checks the load generator's lean client against grpc-go's on
// one in-process sluice server: the same answers, a refused request as an
// error, and more traffic than HTTP/2's initial windows so that flow
// control is exercised.
func TestRawConn(t *testing.T) {
	addr := startSluice(t)
	ctx := context.Background()
	raw, err := rls.DialRaw(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)

	req := func(key string) *pb.RateLimitRequest {
		return &pb.RateLimitRequest{Domain: "bench", Descriptors: []*commonpb.RateLimitDescriptor{
			{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "load", Value: key}}},
		}}
	}
	// Alternate the clients on each key: the fourth call is over whoever
	// makes it.
	for i := range 8 {
		r := req("k" + strconv.Itoa(i/4))
		var got pb.RateLimitResponse_Code
		if i%2 == 0 {
			enc, err := rls.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			if got, err = raw.Call(enc); err != nil {
				t.Fatalf("call %d: raw: %v", i, err)
			}
		} else {
			resp, err := client.ShouldRateLimit(ctx, r)
			if err != nil {
				t.Fatalf("call %d: grpc: %v", i, err)
			}
			got = resp.OverallCode
		}
		want := pb.RateLimitResponse_OK
		if i%4 == 3 {
			want = pb.RateLimitResponse_OVER_LIMIT
		}
		if got != want {
			t.Errorf("call %d: overall_code %v, want %v", i, got, want)
		}
	}

	// A request the server refuses (no descriptors): InvalidArgument.
	bad, _ := rls.Encode(&pb.RateLimitRequest{Domain: "bench"})
	if _, err := raw.Call(bad); err == nil || !strings.Contains(err.Error(), "grpc-status 3") {
		t.Errorf("raw call without descriptors = %v, want grpc-status 3 (InvalidArgument)", err)
	}

	// Past the 64 KiB initial windows, from concurrent callers.
	big := req(strings.Repeat("x", 2000))
	enc, _ := rls.Encode(big)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := raw.Call(enc); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent raw calls: %v", err)
	}
}

// startSluice serves sluice rls on the memory store over gRPC on loopback,
// in process, with the config of TestRawConn.
func startSluice(t testing.TB) string {
	t.Helper()
	cfg, err := rules.Parse("bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: load\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	srv, err := sluicerls.New(store, set, sluicerls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(sluicerls.ServerOptions()...)
	srv.Register(g)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// BenchmarkRawConn is a call through the load generator's client to sluice
// rls in process: the client's and the server's cost together.
func BenchmarkRawConn(b *testing.B) {
	raw, err := rls.DialRaw(context.Background(), startSluice(b))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	reqs := make([]rls.Encoded, 1024)
	for i := range reqs {
		if reqs[i], err = rls.Encode(&pb.RateLimitRequest{Domain: "bench", Descriptors: []*commonpb.RateLimitDescriptor{
			{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "load", Value: "k" + strconv.Itoa(i)}}},
		}}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Uint64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(p *testing.PB) {
		i := next.Add(1) * 7919
		for p.Next() {
			i++
			if _, err := raw.Call(reqs[i%uint64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestUpgrade1059 checks the rewrite of pre-#1059 answers: a quota
// descriptor over its limit (OK, no reset) becomes OVER_LIMIT, and the
// overall code follows #1059's rule.
func TestUpgrade1059(t *testing.T) {
	quota := &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "quota"}}}
	user := &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "user", Value: "u"}}}
	lim := &pb.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: pb.RateLimitResponse_RateLimit_MINUTE}
	reset := durationpb.New(51 * time.Second)
	over := func() *pb.RateLimitResponse_DescriptorStatus {
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, CurrentLimit: lim}
	}
	under := func() *pb.RateLimitResponse_DescriptorStatus {
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, CurrentLimit: lim, LimitRemaining: 1, DurationUntilReset: reset}
	}
	for _, tc := range []struct {
		name     string
		descs    []*commonpb.RateLimitDescriptor
		statuses []*pb.RateLimitResponse_DescriptorStatus
		want     pb.RateLimitResponse_Code
	}{
		{"every quota over", []*commonpb.RateLimitDescriptor{quota, quota}, []*pb.RateLimitResponse_DescriptorStatus{over(), over()}, pb.RateLimitResponse_OVER_LIMIT},
		{"one quota over of two", []*commonpb.RateLimitDescriptor{quota, quota}, []*pb.RateLimitResponse_DescriptorStatus{over(), under()}, pb.RateLimitResponse_OK},
		{"quota over, regular under", []*commonpb.RateLimitDescriptor{quota, user}, []*pb.RateLimitResponse_DescriptorStatus{over(), under()}, pb.RateLimitResponse_OVER_LIMIT},
		{"nothing over", []*commonpb.RateLimitDescriptor{quota, user}, []*pb.RateLimitResponse_DescriptorStatus{under(), under()}, pb.RateLimitResponse_OK},
	} {
		old := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: tc.statuses}
		now := &pb.RateLimitResponse{Statuses: []*pb.RateLimitResponse_DescriptorStatus{under(), under()}}
		rls.Upgrade1059(&pb.RateLimitRequest{Descriptors: tc.descs}, old, now)
		if old.OverallCode != tc.want {
			t.Errorf("%s: overall %v, want %v", tc.name, old.OverallCode, tc.want)
		}
		if tc.descs[0] == quota && tc.statuses[0].GetDurationUntilReset() == nil {
			t.Errorf("%s: the quota descriptor over its limit has no duration_until_reset", tc.name)
		}
	}
}
