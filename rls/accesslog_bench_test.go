package rls_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
)

// BenchmarkShouldRateLimitAccessLog is BenchmarkShouldRateLimit with the
// access log on (a file, every decision, a bound high enough that none is
// dropped for it): the cost of a line a descriptor.
func BenchmarkShouldRateLimitAccessLog(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	al, err := accesslog.New(accesslog.Options{Writer: f, Server: "rls", MaxPerSecond: 1 << 30, Identity: accesslog.Hashed})
	if err != nil {
		b.Fatal(err)
	}
	defer al.Close()
	srv := benchServerOpts(b, rls.Options{Headers: header.Off, AccessLog: al})
	runParallel(b, benchRequests(), func(r *pb.RateLimitRequest) error {
		_, err := srv.ShouldRateLimit(context.Background(), r)
		return err
	})
}
