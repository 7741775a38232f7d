package rls_test

import (
	"context"
	"net"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// BenchmarkShouldRateLimitStats is BenchmarkShouldRateLimit with
// envoyproxy/ratelimit's outputs turned on: statsd (counters summed in
// process, sent to a real UDP socket at each flush) and the local
// over-limit cache (most of these requests are over, so most are answered
// from it). Each adds an atomic add or a shard lookup per descriptor and
// no allocation.
func BenchmarkShouldRateLimitStats(b *testing.B) {
	for _, c := range []struct {
		name   string
		statsd bool
		cache  int
	}{
		{"plain", false, 0},
		{"statsd", true, 0},
		{"localcache", false, 1 << 20},
		{"statsd+localcache", true, 1 << 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg, err := rules.Parse("test.yaml", []byte(testConfig))
			if err != nil {
				b.Fatal(err)
			}
			set, _ := rules.NewSet(cfg)
			store := memstore.New(memstore.Options{})
			b.Cleanup(func() { store.Close() })
			opts := rls.Options{Headers: header.Off, LocalCacheSize: c.cache}
			if c.statsd {
				ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { ln.Close() })
				sd, err := rls.DialStatsd(ln.LocalAddr().String(), rls.StatsdOptions{FlushInterval: 100 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { sd.Close() })
				opts.Statsd = sd
			}
			srv, err := rls.New(store, set, opts)
			if err != nil {
				b.Fatal(err)
			}
			runParallel(b, benchRequests(), func(r *pb.RateLimitRequest) error {
				_, err := srv.ShouldRateLimit(context.Background(), r)
				return err
			})
		})
	}
}
