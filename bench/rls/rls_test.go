package rls_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/redistest"
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
