package rls_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// BenchmarkShouldRateLimitAccessLog is BenchmarkShouldRateLimit with the
// access log on (a file, every decision, a bound high enough that none is
// dropped for it): the cost of a line a descriptor.
func BenchmarkShouldRateLimitAccessLog(b *testing.B) {
	cfg, err := rules.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		b.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	defer store.Close()
	f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	al, err := accesslog.New(accesslog.Options{Writer: f, Server: "rls", MaxPerSecond: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer al.Close()
	srv, err := rls.New(store, set, rls.Options{Headers: header.Off, AccessLog: al})
	if err != nil {
		b.Fatal(err)
	}
	runParallel(b, benchRequests(), func(r *pb.RateLimitRequest) error {
		_, err := srv.ShouldRateLimit(context.Background(), r)
		return err
	})
}
