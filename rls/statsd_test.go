package rls_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
)

// statsdListener is a real statsd server's socket: a UDP listener on
// 127.0.0.1 that collects every line it receives, summing counters.
type statsdListener struct {
	conn *net.UDPConn
}

func listenStatsd(t *testing.T) *statsdListener {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &statsdListener{conn: c}
}

func (l *statsdListener) addr() string { return l.conn.LocalAddr().String() }

// read returns the lines received until no datagram has come for 50 ms.
// The sender has flushed before read is called, and a loopback UDP write
// is in the receiver's buffer when it returns: the wait only ends the
// read, nothing is timed.
func (l *statsdListener) read(t *testing.T) []string {
	t.Helper()
	var lines []string
	buf := make([]byte, 64<<10)
	for {
		l.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := l.conn.Read(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return lines
			}
			t.Fatal(err)
		}
		if n > 1432 {
			t.Errorf("a datagram of %d bytes, want at most 1432", n)
		}
		for _, ln := range strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n") {
			lines = append(lines, ln)
		}
	}
}

// values maps "name|type" to the value of lines (counters summed).
func statsdValues(t *testing.T, lines []string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, ln := range lines {
		name, rest, ok := strings.Cut(ln, ":")
		val, typ, ok2 := strings.Cut(rest, "|")
		v, err := strconv.ParseUint(val, 10, 64)
		if !ok || !ok2 || err != nil {
			t.Fatalf("malformed statsd line %q", ln)
		}
		if typ == "c" {
			m[name+"|c"] += v
		} else {
			m[name+"|"+typ] = v
		}
	}
	return m
}

const statsdConfig = `domain: edge
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: api_key
    descriptors:
      - key: path
        rate_limit:
          unit: minute
          requests_per_unit: 2
  - key: shadow
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
`

func sdReq(domain string, hits uint32, kv ...string) *pb.RateLimitRequest {
	var entries []*commonpb.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		entries = append(entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &pb.RateLimitRequest{Domain: domain, HitsAddend: hits,
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: entries}}}
}

// TestStatsd sends envoyproxy/ratelimit's stats to a real UDP listener and
// checks their names and values: the per-rule counters (a sanitised IPv4
// detailed key, a bounded set of detailed keys), the service counters, the
// tags, and that a counter that did not move is not sent again.
func TestStatsd(t *testing.T) {
	l := listenStatsd(t)
	sd, err := rls.DialStatsd(l.addr(), rls.StatsdOptions{FlushInterval: time.Hour,
		Tags: map[string]string{"cluster": "eu1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(statsdConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1772445600, 0) // a minute's start: every window below is one
	clock := func() time.Time { return now }
	store := memstore.New(memstore.Options{Now: clock})
	defer store.Close()
	srv, err := rls.New(store, nil, rls.Options{Statsd: sd, Now: clock, MaxDetailedSeries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Load(dir); err != nil {
		t.Fatal(err)
	}
	if err := srv.Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("loading a missing directory: no error")
	}
	ctx := context.Background()
	for _, r := range []*pb.RateLimitRequest{
		sdReq("edge", 1, "api_key", "k", "path", "/a"),   // 1 of 2: within
		sdReq("edge", 1, "api_key", "k", "path", "/a"),   // 2 of 2: within, near
		sdReq("edge", 3, "api_key", "k", "path", "/a"),   // over: 3 over_limit
		sdReq("edge", 1, "remote_address", "10.0.0.1"),   // detailed key 1
		sdReq("edge", 1, "remote_address", "10.0.0.2"),   // detailed key 2
		sdReq("edge", 1, "remote_address", "10.0.0.3"),   // past the bound: overflow
		sdReq("edge", 2, "shadow", "x"),                  // shadow: 1 over
		sdReq("nowhere", 1, "remote_address", "1.2.3.4"), // unknown domains: domain_not_found,
		sdReq("nowhere", 1, "remote_address", "1.2.3.5"), // bounded as detailed keys are
		sdReq("elsewhere", 1, "remote_address", "1.2.3.4"),
		sdReq("third", 1, "remote_address", "1.2.3.4"), // past the bound of 2
	} {
		if _, err := srv.ShouldRateLimit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "edge"}); err == nil {
		t.Fatal("a request without descriptors: no error")
	}
	sd.Flush()
	got := statsdValues(t, l.read(t))
	const tag = ".__cluster=eu1"
	rl := "ratelimit.service.rate_limit."
	want := map[string]uint64{
		rl + "edge.api_key.path.total_hits" + tag + "|c":                      5,
		rl + "edge.api_key.path.within_limit" + tag + "|c":                    2,
		rl + "edge.api_key.path.near_limit" + tag + "|c":                      1,
		rl + "edge.api_key.path.over_limit" + tag + "|c":                      3,
		rl + "edge.remote_address_10_0_0_1.total_hits" + tag + "|c":           1,
		rl + "edge.remote_address_10_0_0_2.within_limit" + tag + "|c":         1,
		rl + "edge.remote_address.__overflow__.total_hits" + tag + "|c":       1,
		rl + "edge.shadow.total_hits" + tag + "|c":                            2,
		rl + "edge.shadow.over_limit" + tag + "|c":                            1,
		rl + "edge.shadow.near_limit" + tag + "|c":                            1,
		rl + "edge.shadow.shadow_mode" + tag + "|c":                           1,
		"ratelimit.service.config_load_success" + tag + "|c":                  1,
		"ratelimit.service.config_load_error" + tag + "|c":                    1,
		"ratelimit.service.call.should_rate_limit.service_error" + tag + "|c": 1,
		"ratelimit_server.ShouldRateLimit.total_requests" + tag + "|c":        12,
		rl + "nowhere.domain_not_found" + tag + "|c":                          2,
		rl + "elsewhere.domain_not_found" + tag + "|c":                        1,
		rl + "__overflow__.domain_not_found" + tag + "|c":                     1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "10_0_0_3") || strings.Contains(k, "third") || strings.Contains(k, "redis_error") {
			t.Errorf("unexpected stat %s", k)
		}
		if !strings.Contains(k, tag) {
			t.Errorf("%s lacks the tag %s", k, tag)
		}
	}
	if got["ratelimit.go.numGoroutine"+tag+"|g"] == 0 {
		t.Errorf("no Go runtime gauges; got %v", sortedKeys(got))
	}

	// A second flush sends only what moved.
	if _, err := srv.ShouldRateLimit(ctx, sdReq("edge", 1, "api_key", "k", "path", "/b")); err != nil {
		t.Fatal(err)
	}
	sd.Flush()
	got = statsdValues(t, l.read(t))
	for k := range got {
		if strings.HasSuffix(k, "|c") && !strings.Contains(k, "ratelimit.go.") &&
			!strings.Contains(k, "api_key.path") && !strings.Contains(k, "total_requests") {
			t.Errorf("second flush sent %s, which did not move", k)
		}
	}
	if got[rl+"edge.api_key.path.total_hits"+tag+"|c"] != 1 {
		t.Errorf("second flush: total_hits %d, want the delta 1", got[rl+"edge.api_key.path.total_hits"+tag+"|c"])
	}
}

func sortedKeys(m map[string]uint64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestStatsdOptions refuses what cannot be sent.
func TestStatsdOptions(t *testing.T) {
	for _, c := range []struct {
		addr string
		opts rls.StatsdOptions
	}{
		{"127.0.0.1", rls.StatsdOptions{}},
		{"127.0.0.1:8125", rls.StatsdOptions{Network: "sctp"}},
		{"127.0.0.1:8125", rls.StatsdOptions{Tags: map[string]string{"a.b": "c"}}},
		{"127.0.0.1:8125", rls.StatsdOptions{Tags: map[string]string{"a": "c|d"}}},
		{"127.0.0.1:8125", rls.StatsdOptions{FlushInterval: -time.Second}},
	} {
		if sd, err := rls.DialStatsd(c.addr, c.opts); err == nil {
			sd.Close()
			t.Errorf("DialStatsd(%q, %+v): no error", c.addr, c.opts)
		}
	}
	l := listenStatsd(t)
	sd, err := rls.DialStatsd(l.addr(), rls.StatsdOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	if _, err := rls.New(store, nil, rls.Options{Statsd: sd}); err != nil {
		t.Fatal(err)
	}
	if _, err := rls.New(store, nil, rls.Options{Statsd: sd}); err == nil {
		t.Error("a second Server on one Statsd: no error")
	}
}

// TestStatsdTCP sends over TCP, as envoyproxy/ratelimit's gostats sink
// does, to a real listener, and survives the listener going away.
func TestStatsdTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			sb.Write(buf[:n])
			if err != nil || strings.Contains(sb.String(), "config_load_success") {
				got <- sb.String()
				return
			}
		}
	}()
	sd, err := rls.DialStatsd(ln.Addr().String(), rls.StatsdOptions{Network: "tcp", Prefix: "fleet", FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	srv, err := rls.New(store, nil, rls.Options{Statsd: sd})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Load(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	sd.Flush()
	if s := <-got; !strings.Contains(s, "fleet.ratelimit.service.config_load_success:1|c\n") {
		t.Errorf("TCP stream %q lacks fleet.ratelimit.service.config_load_success:1|c", s)
	}
	ln.Close()
	srv.Load(t.TempDir())
	sd.Flush() // the peer is gone: dropped and logged, not a hang or a panic
	sd.Flush()
}
