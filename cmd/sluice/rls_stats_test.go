package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestRLSStatsdAndLocalCache runs sluice rls with a local cache and statsd
// to a real UDP listener: a descriptor over its limit is answered from the
// cache, and the stats arrive with upstream's names, the tag, and the
// cache's counts, while /metrics shows the same.
func TestRLSStatsdAndLocalCache(t *testing.T) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	dir := t.TempDir()
	cfg := "domain: stats\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 3}\n"
	if err := os.WriteFile(filepath.Join(dir, "stats.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr, _ := startRLS(t, "--config-dir", dir, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--local-cache-size-bytes", "1000", "--statsd", udp.LocalAddr().String(), "--statsd-flush-interval", "50ms",
		"--statsd-tags", "env:test")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	var codes []string
	for _, hits := range []uint32{3, 1, 2} { // within; over (cached); over from the cache
		resp, err := c.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "stats", HitsAddend: hits,
			Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "user", Value: "u1"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.OverallCode.String())
	}
	if got := strings.Join(codes, " "); got != "OK OVER_LIMIT OVER_LIMIT" {
		t.Fatalf("codes %s, want OK OVER_LIMIT OVER_LIMIT", got)
	}

	// Read until every stat has arrived (flushes every 50 ms); a bound, not
	// a timing assertion.
	const tag = ".__env=test"
	want := map[string]uint64{
		"ratelimit.service.rate_limit.stats.user.total_hits" + tag + "|c":                  6,
		"ratelimit.service.rate_limit.stats.user.over_limit" + tag + "|c":                  3,
		"ratelimit.service.rate_limit.stats.user.over_limit_with_local_cache" + tag + "|c": 2,
		"ratelimit.service.config_load_success" + tag + "|c":                               1,
		"ratelimit_server.ShouldRateLimit.total_requests" + tag + "|c":                     3,
		"ratelimit.localcache.hitCount" + tag + "|g":                                       1,
		"ratelimit.localcache.missCount" + tag + "|g":                                      2,
	}
	got := map[string]uint64{}
	done := func() bool {
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for !done() && time.Now().Before(deadline) {
		udp.SetReadDeadline(time.Now().Add(time.Second))
		n, err := udp.Read(buf)
		if err != nil {
			continue
		}
		for _, ln := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
			name, rest, _ := strings.Cut(ln, ":")
			val, typ, _ := strings.Cut(rest, "|")
			v, _ := strconv.ParseUint(val, 10, 64)
			if typ == "c" {
				got[name+"|c"] += v
			} else {
				got[name+"|"+typ] = v
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("statsd %s = %d, want %d", k, got[k], v)
		}
	}

	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`ratelimit_service_rate_limit_over_limit_with_local_cache{domain="stats",key1="user",key2=""} 2`,
		"ratelimit_localcache_hitCount 1",
		"ratelimit_localcache_entryCount 1",
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
