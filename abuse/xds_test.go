package abuse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// managementServer is a go-control-plane ADS server in the test's process:
// what an operator's control plane (or one an attacker took over) serves.
// It records the headers of each stream and the node of each request.
type managementServer struct {
	cache cachev3.SnapshotCache
	addr  string

	mu      sync.Mutex
	headers []metadata.MD
	nodes   []*corev3.Node
}

func startManagementServer(t *testing.T) *managementServer {
	t.Helper()
	return startManagementServerWith(t, true, grpc.MaxSendMsgSize(64<<20))
}

// startManagementServerWith serves a snapshot cache, ADS-ordered or not
// (ads), with opts (TLS credentials, say).
func startManagementServerWith(t *testing.T, ads bool, opts ...grpc.ServerOption) *managementServer {
	t.Helper()
	ms := &managementServer{cache: cachev3.NewSnapshotCache(ads, cachev3.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		ms.mu.Lock()
		defer ms.mu.Unlock()
		ms.headers = append(ms.headers, md)
		return nil
	}, StreamRequestFunc: func(_ int64, req *discoverygrpc.DiscoveryRequest) error {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		if n := req.GetNode(); n != nil {
			ms.nodes = append(ms.nodes, n)
		}
		return nil
	}}
	g := grpc.NewServer(opts...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(t.Context(), ms.cache, cb))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms.addr = ln.Addr().String()
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ms
}

func (ms *managementServer) push(t *testing.T, node, version string, cfgs ...*rlsconf.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(cfgs))
	for i, c := range cfgs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// xdsConfig is domain "edge" with api_key=k1 limited to perMinute, and n
// more descriptors with values of about 100 bytes: about 130 bytes each on
// the wire.
func xdsConfig(perMinute uint32, n int) *rlsconf.RateLimitConfig {
	rc := &rlsconf.RateLimitConfig{Name: "edge", Domain: "edge", Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: "api_key", Value: "k1",
		RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute},
	}}}
	for i := range n {
		rc.Descriptors = append(rc.Descriptors, &rlsconf.RateLimitDescriptor{
			Key: "api_key", Value: fmt.Sprintf("%08d-%s", i, strings.Repeat("v", 90)),
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 5},
		})
	}
	return rc
}

var xdsLoaded = regexp.MustCompile(`msg="xds: config loaded" version=(\S+)`)

// startXDSRLS runs `sluice rls --config-type xds` following ms as node.
func startXDSRLS(t *testing.T, ms *managementServer, node string, flags ...string) *rlsProc {
	t.Helper()
	args := append([]string{"rls", "--config-type", "xds", "--xds-server", ms.addr, "--xds-node-id", node,
		"--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, flags...)
	p, m, err := startProc(t, "sluice rls", rlsReady, args...)
	if err != nil {
		skipIfUnknown(t, err, "--xds-max-msg-size")
	}
	return &rlsProc{proc: p, grpc: m[1], http: "http://" + m[2]}
}

// waitVersion waits until r logged that it loaded version.
func (r *rlsProc) waitVersion(t *testing.T, version string) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		for _, l := range r.lines(time.Time{}) {
			if m := xdsLoaded.FindStringSubmatch(l); m != nil && strings.Trim(m[1], `"`) == version {
				return nil
			}
		}
		return fmt.Errorf("version %s not loaded yet", version)
	})
}

// limitOf returns the requests_per_unit of the limit that applied to
// api_key=value in domain edge (0 if none), charging it one hit.
func (r *rlsProc) limitOf(t *testing.T, value string) int {
	t.Helper()
	code, body, err := r.tryDecide(http.DefaultClient, "edge", 1, [][2]string{{"api_key", value}})
	if err != nil || (code != http.StatusOK && code != http.StatusTooManyRequests) {
		t.Fatalf("POST /json: %d %v %.200s", code, err, body)
	}
	var resp struct {
		Statuses []struct {
			CurrentLimit struct {
				RequestsPerUnit int `json:"requestsPerUnit"`
			} `json:"currentLimit"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Statuses) != 1 {
		t.Fatalf("POST /json: %v in %.200s", err, body)
	}
	return resp.Statuses[0].CurrentLimit.RequestsPerUnit
}

// enforcesLimit checks that a value of api_key in domain edge not asked
// for before, under a rule of limit a minute, admits limit hits and
// denies the next. The rule's window is a clock minute, so a check that
// straddles a minute's end is tried again once with another value.
func (r *rlsProc) enforcesLimit(t *testing.T, values [2]string, limit int) {
	t.Helper()
	var err error
	for _, v := range values {
		err = nil
		for i := range limit + 1 {
			want := http.StatusOK
			if i == limit {
				want = http.StatusTooManyRequests
			}
			if got := r.decide(t, "edge", 1, [][2]string{{"api_key", v}}); got != want && err == nil {
				err = fmt.Errorf("request %d for api_key=%.20s: %d, want %d (limit %d)", i+1, v, got, want, limit)
			}
		}
		if err == nil {
			return
		}
	}
	t.Fatal(err)
}

// peakRSS returns the most resident memory the process has had (VmHWM).
func (p *proc) peakRSS(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc/<pid>/status to read memory from: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

var debugAddr = regexp.MustCompile(`msg="sluice rls: listening" .*debug=(\S+)`)

// liveHeap returns the heap in use after a garbage collection, read from
// the debug listener's heap profile (which collects first, with gc=1).
func (r *rlsProc) liveHeap(t *testing.T) int64 {
	t.Helper()
	var addr string
	for _, l := range r.lines(time.Time{}) {
		if m := debugAddr.FindStringSubmatch(l); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatal("no debug listener address in the log")
	}
	res, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no HeapInuse in the heap profile: %.300s", b)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// numbered is the value of the i-th of xdsConfig's extra descriptors.
func numbered(i int) string { return fmt.Sprintf("%08d-%s", i, strings.Repeat("v", 90)) }

// Attack: the management server (misconfigured, or taken over) pushes a
// rule set far larger than any real one: 3 MiB in one response, then a
// burst of ten responses each just under the limit.
//
// Bound: a response past --xds-max-msg-size (here 1 MiB; by default 4 MiB,
// XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES, gRPC's default as upstream) is refused
// unread: the rules in use stay and keep answering,
// sluice_xds_updates_refused_total counts it and the log says why. A
// response that fits is decoded at a transient cost of about 70 times its
// size (rls/xds.Convert) and replaces the last one: after eleven 0.9 MiB
// rule sets the live heap is under 48 MiB (one is kept), and RSS peaks
// under 256 MiB above where it started (the decodes' garbage and the
// collector's headroom; measured: 168 MiB).
func TestXDSOversizedPush(t *testing.T) {
	t.Parallel()
	ms := startManagementServer(t)
	ms.push(t, "abuse", "1", xdsConfig(2, 10))
	r := startXDSRLS(t, ms, "abuse", "--xds-max-msg-size", "1048576", "--debug-listen", "127.0.0.1:0")
	r.waitVersion(t, "1")
	r.enforcesLimit(t, [2]string{numbered(1), numbered(2)}, 5)
	before := r.rss(t)

	// 3 MiB in one response: refused.
	ms.push(t, "abuse", "2", xdsConfig(50, 24000))
	eventually(t, time.Minute, func() error {
		m, err := tryScrape(r.http)
		if err != nil {
			return err
		}
		if v, _ := m.get("sluice_xds_updates_refused_total"); v < 1 {
			return fmt.Errorf("sluice_xds_updates_refused_total is %v", v)
		}
		return nil
	})
	r.alive(t)
	if got := r.limitOf(t, "k1"); got != 2 {
		t.Fatalf("after the oversized push, api_key=k1's limit is %d, want 2 (version 1 kept)", got)
	}
	found := false
	for _, l := range r.lines(time.Time{}) {
		if strings.Contains(l, "larger than the message limit") {
			found = true
		}
	}
	if !found {
		t.Errorf("no log line says the response was larger than the message limit")
	}

	// ~0.9 MiB: taken.
	ms.push(t, "abuse", "3", xdsConfig(13, 7000))
	r.waitVersion(t, "3")
	mid := r.rss(t)
	// Ten more, each taken in turn, each replacing the last.
	for v := 4; v <= 13; v++ {
		ms.push(t, "abuse", fmt.Sprint(v), xdsConfig(uint32(10+v), 7000))
		r.waitVersion(t, fmt.Sprint(v))
	}
	r.alive(t)
	after := r.rss(t)
	live := r.liveHeap(t)
	if live > 48<<20 {
		t.Errorf("after ten 0.9 MiB pushes, %s of live heap, want under 48 MiB (one rule set is kept)", mib(live))
	}
	peak := r.peakRSS(t)
	if peak-before > 256<<20 {
		t.Errorf("RSS peaked %s above where it started, want under 256 MiB", mib(peak-before))
	}
	if got := r.limitOf(t, "k1"); got != 23 {
		t.Fatalf("after version 13, api_key=k1's limit is %d, want 23", got)
	}
	r.enforcesLimit(t, [2]string{numbered(4321), numbered(4322)}, 5)
	t.Logf("RSS %s, %s after a refused 3 MiB push and a 0.9 MiB one, %s after ten more (peak %s); live heap then %s", mib(before), mib(mid), mib(after), mib(peak), mib(live))
}
