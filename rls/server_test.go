package rls_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/internal/transport/h2grpc"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// testConfig is an unmodified-style envoyproxy/ratelimit config, plus one
// sluice rule (bucket).
const testConfig = `domain: test
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: shadow
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: free
    rate_limit:
      unlimited: true
  - key: path
    value: "/api/*"
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit:
          unit: hour
          requests_per_unit: 2
  - key: specific
    rate_limit:
      name: specific
      unit: minute
      requests_per_unit: 1
      replaces:
        - name: general
  - key: general
    rate_limit:
      name: general
      unit: minute
      requests_per_unit: 1
  - key: detailed
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: bucket
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 10
      burst: 2
  - key: quota
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: daily
    quota:
      period: day
      limit: 2
  - key: blocked
    rate_limit:
      unit: second
      requests_per_unit: 0
`

// clock is a settable clock shared by the store and the server, so that
// windows are deterministic.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// t0 is 30 s into a minute (and an hour): far from window boundaries.
var t0 = time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC)

type harness struct {
	srv    *rls.Server
	client pb.RateLimitServiceClient
	conn   *grpc.ClientConn
	clock  *clock
	dir    string
}

func writeConfig(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// grpcGoTests names the tests served by grpc-go's server rather than
// h2grpc's, which sluice rls serves with by default.
var grpcGoTests sync.Map

// grpcServer is what serve needs of grpc-go's and h2grpc's servers.
type grpcServer interface {
	grpc.ServiceRegistrar
	Serve(net.Listener) error
	Stop()
}

// serve starts s on a loopback gRPC listener and returns a client.
func serve(t testing.TB, s *rls.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var g grpcServer = h2grpc.NewServer(h2grpc.Options{})
	if _, ok := grpcGoTests.Load(t.Name()); ok {
		g = grpc.NewServer(rls.ServerOptions()...)
	}
	s.Register(g)
	done := make(chan struct{})
	go func() { defer close(done); g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		<-done
	})
	return conn
}

// storeFunc returns a store reading the clock now.
type storeFunc func(t testing.TB, now func() time.Time) ratelimit.Store

// parallelStores names the tests whose store is remote: their servers
// apply descriptors concurrently, as sluice rls does with Redis.
var parallelStores sync.Map

func memoryStore(t testing.TB, now func() time.Time) ratelimit.Store {
	s := memstore.New(memstore.Options{Now: now})
	t.Cleanup(func() { s.Close() })
	return s
}

// forEachStore runs f as parallel subtests (named name/store) against the
// memory store and, when redis-server is installed (always under CI=true),
// a real Redis (also with its deny cache) and a real 3-master Redis Cluster.
func forEachStore(t *testing.T, name string, f func(t *testing.T, store storeFunc)) {
	t.Helper()
	if name != "" {
		name += "/"
	}
	t.Run(name+"memory", func(t *testing.T) {
		t.Parallel()
		f(t, memoryStore)
	})
	t.Run(name+"memory-grpc-go", func(t *testing.T) {
		t.Parallel()
		f(t, func(t testing.TB, now func() time.Time) ratelimit.Store {
			grpcGoTests.Store(t.Name(), true)
			return memoryStore(t, now)
		})
	})
	for _, kind := range []string{"redis", "redis-cluster", "redis-denycache"} {
		t.Run(name+kind, func(t *testing.T) {
			if testing.Short() {
				t.Skip("-short: no Redis")
			}
			redistest.Require(t)
			t.Parallel()
			url := ""
			if kind == "redis-cluster" {
				url = redistest.SharedCluster(t).URL()
			} else {
				url = redistest.Shared(t).URL()
			}
			f(t, func(t testing.TB, now func() time.Time) ratelimit.Store {
				parallelStores.Store(t.Name(), true)
				s, err := redisstore.Open(context.Background(), url, redisstore.Options{
					Now: now, Prefix: redistest.Prefix(t), Timeout: 10 * time.Second,
					DenyCache: kind == "redis-denycache", // as sluice rls --deny-cache
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}

func newHarness(t testing.TB, store storeFunc, opts rls.Options) *harness {
	t.Helper()
	h := &harness{clock: &clock{t: t0}, dir: t.TempDir()}
	writeConfig(t, h.dir, "test.yaml", testConfig)
	set, err := rules.LoadDir(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	if store == nil {
		store = memoryStore
	}
	h.start(t, store, set, opts)
	return h
}

// start serves set from a store made by store, on h's clock, and dials
// it.
func (h *harness) start(t testing.TB, store storeFunc, set *rules.Set, opts rls.Options) {
	t.Helper()
	opts.Now = h.clock.Now
	_, opts.ParallelDescriptors = parallelStores.Load(t.Name())
	srv, err := rls.New(store(t, h.clock.Now), set, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.conn = serve(t, h.srv)
	h.client = pb.NewRateLimitServiceClient(h.conn)
}

// d builds a descriptor from key/value pairs.
func d(kv ...string) *commonpb.RateLimitDescriptor {
	out := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Entries = append(out.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func withHits(desc *commonpb.RateLimitDescriptor, n uint64) *commonpb.RateLimitDescriptor {
	desc.HitsAddend = wrapperspb.UInt64(n)
	return desc
}

func (h *harness) call(t testing.TB, hits uint32, descs ...*commonpb.RateLimitDescriptor) *pb.RateLimitResponse {
	t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "test", Descriptors: descs, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit = %v", err)
	}
	return resp
}

// st is the part of a descriptor status the tables compare.
type st struct {
	code      pb.RateLimitResponse_Code
	remaining uint32
	limit     uint32 // requests_per_unit; 0 when no current_limit
	reset     int64  // seconds; -1 when absent
}

func statusOf(s *pb.RateLimitResponse_DescriptorStatus) st {
	out := st{code: s.Code, remaining: s.LimitRemaining, reset: -1}
	if s.CurrentLimit != nil {
		out.limit = s.CurrentLimit.RequestsPerUnit
	}
	if s.DurationUntilReset != nil {
		out.reset = s.DurationUntilReset.Seconds
	}
	return out
}

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

// step is one request of a sequence and the status of its first
// descriptor.
type step struct {
	hits uint32
	desc *commonpb.RateLimitDescriptor
	want st
}

func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for i, s := range steps {
		resp := h.call(t, s.hits, s.desc)
		got := statusOf(resp.Statuses[0])
		if got != s.want {
			t.Fatalf("step %d: ShouldRateLimit(%v, hits %d) status = %+v, want %+v", i, s.desc, s.hits, got, s.want)
		}
		wantOverall := ok
		if s.want.code == over {
			wantOverall = over
		}
		if resp.OverallCode != wantOverall {
			t.Fatalf("step %d: overall_code = %v, want %v", i, resp.OverallCode, wantOverall)
		}
	}
}

func TestSemantics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"fixed window", []step{
			{0, d("user", "alice"), st{ok, 2, 3, 30}},
			{0, d("user", "alice"), st{ok, 1, 3, 30}},
			{0, d("user", "alice"), st{ok, 0, 3, 30}},
			{0, d("user", "alice"), st{over, 0, 3, 30}},
			{0, d("user", "bob"), st{ok, 2, 3, 30}}, // another value, another counter
		}},
		{"request hits_addend", []step{
			{2, d("user", "alice"), st{ok, 1, 3, 30}},
			{1, d("user", "alice"), st{ok, 0, 3, 30}},
		}},
		{"descriptor hits_addend wins; 0 checks without counting", []step{
			{0, withHits(d("user", "alice"), 0), st{ok, 3, 3, 30}},
			{5, withHits(d("user", "alice"), 2), st{ok, 1, 3, 30}},
			{0, withHits(d("user", "alice"), 0), st{ok, 1, 3, 30}},
			{0, d("user", "alice"), st{ok, 0, 3, 30}},
		}},
		{"every hit counts, as INCRBY: an over-limit cost exhausts the window", []step{
			{2, d("user", "alice"), st{ok, 1, 3, 30}},
			{2, d("user", "alice"), st{over, 0, 3, 30}},
			{1, d("user", "alice"), st{over, 0, 3, 30}},
		}},
		{"a cost above the limit is over and exhausts the window", []step{
			{5, d("user", "alice"), st{over, 0, 3, 30}},
			{1, d("user", "alice"), st{over, 0, 3, 30}},
		}},
		{"shadow mode answers OK but counts", []step{
			{0, d("shadow", "x"), st{ok, 0, 1, 30}},
			{0, d("shadow", "x"), st{ok, 0, 1, 30}},
			{0, d("shadow", "x"), st{ok, 0, 1, 30}},
		}},
		{"quota mode alone: over when its only quota is (upstream #1059)", []step{
			{0, d("quota", "x"), st{ok, 0, 1, 30}},
			{0, d("quota", "x"), st{over, 0, 1, 30}},
		}},
		{"calendar quota (sluice): a UTC day, reset at midnight", []step{
			{0, d("daily", "x"), st{ok, 1, 2, 50370}},
			{0, d("daily", "x"), st{ok, 0, 2, 50370}},
			{0, d("daily", "x"), st{over, 0, 2, 50370}},
		}},
		{"unlimited", []step{
			{0, d("free", "x"), st{ok, math.MaxUint32, 0, -1}},
			{1000, d("free", "x"), st{ok, math.MaxUint32, 0, -1}},
		}},
		{"no rule", []step{
			{0, d("nope", "x"), st{ok, 0, 0, -1}},
			{0, d("user", "alice", "extra", "y"), st{ok, 0, 0, -1}}, // deeper than the rule
		}},
		{"wildcard values, one counter per value", []step{
			{0, d("path", "/api/users"), st{ok, 1, 2, 30}},
			{0, d("path", "/api/users"), st{ok, 0, 2, 30}},
			{0, d("path", "/api/users"), st{over, 0, 2, 30}},
			{0, d("path", "/api/items"), st{ok, 1, 2, 30}},
			{0, d("path", "/other"), st{ok, 0, 0, -1}},
		}},
		{"nested descriptors", []step{
			{0, d("tenant", "acme", "user", "bob"), st{ok, 1, 2, 3600 - 30}},
			{0, d("tenant", "acme", "user", "bob"), st{ok, 0, 2, 3600 - 30}},
			{0, d("tenant", "acme", "user", "bob"), st{over, 0, 2, 3600 - 30}},
			{0, d("tenant", "other", "user", "bob"), st{ok, 0, 0, -1}},
			{0, d("tenant", "acme"), st{ok, 0, 0, -1}},
			{0, d("user", "bob"), st{ok, 2, 3, 30}}, // the top-level rule is another counter
		}},
		{"token bucket", []step{
			{0, d("bucket", "x"), st{ok, 1, 10, 1}},
			{0, d("bucket", "x"), st{ok, 0, 10, 1}},
			{0, d("bucket", "x"), st{over, 0, 10, 1}},
		}},
		{"zero requests_per_unit blocks everything", []step{
			{0, withHits(d("blocked", "x"), 0), st{ok, 0, 0, 1}}, // a check of an empty window
			{0, d("blocked", "x"), st{over, 0, 0, 1}},
			{0, withHits(d("blocked", "x"), 0), st{over, 0, 0, 1}}, // the window has overflowed
		}},
		{"a check is over only once the window has overflowed, as count > limit", []step{
			{3, d("user", "alice"), st{ok, 0, 3, 30}},
			{0, withHits(d("user", "alice"), 0), st{ok, 0, 3, 30}}, // full, not over
			{0, d("user", "alice"), st{over, 0, 3, 30}},
			{0, withHits(d("user", "alice"), 0), st{over, 0, 3, 30}},
		}},
	} {
		forEachStore(t, tc.name, func(t *testing.T, store storeFunc) {
			runSteps(t, newHarness(t, store, rls.Options{}), tc.steps)
		})
	}
}

func TestWindowResets(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := newHarness(t, store, rls.Options{})
		runSteps(t, h, []step{
			{3, d("user", "alice"), st{ok, 0, 3, 30}},
			{0, d("user", "alice"), st{over, 0, 3, 30}},
		})
		h.clock.Add(time.Minute)
		runSteps(t, h, []step{{0, d("user", "alice"), st{ok, 2, 3, 30}}})
	})
}

func TestCurrentLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	resp := h.call(t, 0, d("specific", "x"), d("tenant", "acme", "user", "u"))
	if got := resp.Statuses[0].CurrentLimit; got.GetName() != "specific" || got.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE || got.GetRequestsPerUnit() != 1 {
		t.Errorf("current_limit = %v, want specific 1/MINUTE", got)
	}
	if got := resp.Statuses[1].CurrentLimit; got.GetName() != "" || got.GetUnit() != pb.RateLimitResponse_RateLimit_HOUR {
		t.Errorf("current_limit = %v, want unnamed 2/HOUR", got)
	}
	if got := h.call(t, 0, d("daily", "x")).Statuses[0].CurrentLimit; got.GetUnit() != pb.RateLimitResponse_RateLimit_DAY || got.GetRequestsPerUnit() != 2 {
		t.Errorf("current_limit of a daily quota = %v, want 2/DAY", got)
	}
}

func TestReplaces(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := newHarness(t, store, rls.Options{})
		// general alone is enforced.
		runSteps(t, h, []step{
			{0, d("general", "g"), st{ok, 0, 1, 30}},
			{0, d("general", "g"), st{over, 0, 1, 30}},
		})
		// Together with specific, general is replaced: not applied, not counted.
		h.clock.Add(time.Minute)
		for i, want := range [][]st{
			{{ok, 0, 1, 30}, {ok, 0, 0, -1}},
			{{over, 0, 1, 30}, {ok, 0, 0, -1}},
		} {
			resp := h.call(t, 0, d("specific", "s"), d("general", "g"))
			for j := range want {
				if got := statusOf(resp.Statuses[j]); got != want[j] {
					t.Errorf("call %d: statuses[%d] = %+v, want %+v", i, j, got, want[j])
				}
			}
		}
		// The replaced rule counted only its own two requests.
		if got, err := gatherOne(h.srv, "ratelimit_service_rate_limit_total_hits", "general"); got != 2 {
			t.Errorf("total_hits{key=general} = %v (%v), want 2", got, err)
		}
	})
}

func TestMultipleDescriptors(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := newHarness(t, store, rls.Options{})
		h.call(t, 0, d("general", "g"))
		resp := h.call(t, 0, d("user", "u"), d("general", "g"), d("free", "f"), d("nope", "n"))
		want := []st{{ok, 2, 3, 30}, {over, 0, 1, 30}, {ok, math.MaxUint32, 0, -1}, {ok, 0, 0, -1}}
		if resp.OverallCode != over {
			t.Errorf("overall_code = %v, want OVER_LIMIT", resp.OverallCode)
		}
		for i, w := range want {
			if got := statusOf(resp.Statuses[i]); got != w {
				t.Errorf("statuses[%d] = %+v, want %+v", i, got, w)
			}
		}
	})
}

// Descriptors of one request apply in order, also with a remote store
// where distinct keys apply concurrently: the same key twice sees the
// first one's hits.
func TestRepeatedDescriptorInOrder(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := newHarness(t, store, rls.Options{})
		resp := h.call(t, 0, withHits(d("user", "u"), 5), d("user", "u"), d("path", "/api/a"), d("path", "/api/b"))
		want := []st{{over, 0, 3, 30}, {over, 0, 3, 30}, {ok, 1, 2, 30}, {ok, 1, 2, 30}}
		for i, w := range want {
			if got := statusOf(resp.Statuses[i]); got != w {
				t.Errorf("statuses[%d] = %+v, want %+v", i, got, w)
			}
		}
	})
}

func TestLimitOverride(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := newHarness(t, store, rls.Options{})
		o := d("user", "carol")
		o.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typepb.RateLimitUnit_SECOND}
		runSteps(t, h, []step{
			{0, o, st{ok, 0, 1, 1}},
			{0, o, st{over, 0, 1, 1}},
			{0, d("user", "carol"), st{ok, 2, 3, 30}}, // the configured rule is another window
		})
		// An override on an unknown domain applies nothing, as envoyproxy/ratelimit.
		resp, err := h.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "unknown", Descriptors: []*commonpb.RateLimitDescriptor{o}})
		if err != nil || resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil {
			t.Errorf("override on unknown domain = %v, %v; want OK with no limit", resp, err)
		}
		// unit_multiplier: 2 per 10 minutes.
		o2 := d("user", "dave")
		o2.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typepb.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(10)}
		resp = h.call(t, 0, o2)
		if cl := resp.Statuses[0].CurrentLimit; cl.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE || cl.GetUnitMultiplier().GetValue() != 10 {
			t.Errorf("current_limit = %v, want 2 per 10 MINUTE", cl)
		}
	})
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	badUnit := d("user", "x")
	badUnit.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	negative := d("user", "x")
	negative.IsNegativeHits = true
	for _, tc := range []struct {
		name string
		req  *pb.RateLimitRequest
	}{
		{"empty domain", &pb.RateLimitRequest{Descriptors: []*commonpb.RateLimitDescriptor{d("user", "x")}}},
		{"no descriptors", &pb.RateLimitRequest{Domain: "test"}},
		{"huge hits_addend", &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{withHits(d("user", "x"), math.MaxUint32+1)}}},
		{"max hits_addend", &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{withHits(d("user", "x"), math.MaxUint64)}}},
		{"override with unknown unit", &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{badUnit}}},
		{"negative hits", &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{negative}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := h.client.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("ShouldRateLimit = %v, %v; want InvalidArgument", resp, err)
			}
			if !strings.HasPrefix(status.Convert(err).Message(), "rls: ") {
				t.Errorf("message %q lacks the package prefix", status.Convert(err).Message())
			}
		})
	}
	// The largest hits_addend is a clean OVER_LIMIT, not an error.
	runSteps(t, h, []step{{math.MaxUint32, d("user", "y"), st{over, 0, 3, 30}}})
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	headers := func(resp *pb.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range resp.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	t.Run("legacy", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, rls.Options{Headers: header.Legacy})
		got := headers(h.call(t, 0, d("user", "u"), d("path", "/api/x")))
		want := map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "30"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
			}
		}
	})
	t.Run("ietf", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, rls.Options{Headers: header.IETF})
		h.call(t, 0, d("specific", "s"))
		got := headers(h.call(t, 0, d("user", "u"), d("specific", "s")))
		want := map[string]string{
			"RateLimit-Policy": `"test.user";q=3;w=60, "specific";q=1;w=60`,
			"RateLimit":        `"test.user";r=2;t=30, "specific";r=0;t=30`,
			"Retry-After":      "30",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, rls.Options{Headers: header.Off})
		if got := h.call(t, 0, d("user", "u")).ResponseHeadersToAdd; len(got) != 0 {
			t.Errorf("headers = %v, want none", got)
		}
	})
}

func TestGlobalShadowMode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{ShadowMode: true})
	h.call(t, 0, d("general", "g"))
	resp := h.call(t, 0, d("general", "g"))
	if resp.OverallCode != ok || resp.Statuses[0].Code != over {
		t.Errorf("global shadow mode: overall %v, status %v; want OK overall and OVER_LIMIT in the status", resp.OverallCode, resp.Statuses[0].Code)
	}
	if got := metricValue(h.srv, "ratelimit_service_global_shadow_mode"); got != 1 {
		t.Errorf("global_shadow_mode = %v, want 1", got)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	for range 5 {
		h.call(t, 0, d("user", "u"), d("shadow", "s"), d("detailed", "alice"))
	}
	for _, tc := range []struct {
		metric, key string
		want        float64
	}{
		{"total_hits", "user", 5},
		{"within_limit", "user", 3},
		{"near_limit", "user", 1}, // past floor(3·0.8) = 2: the 3rd hit
		{"over_limit", "user", 2},
		{"total_hits", "shadow", 5},
		{"over_limit", "shadow", 4},
		{"shadow_mode", "shadow", 4},
		{"total_hits", "detailed_alice", 5},
	} {
		name := "ratelimit_service_rate_limit_" + tc.metric
		got, err := gatherOne(h.srv, name, tc.key)
		if err != nil {
			t.Errorf("%s{key=%q}: %v", name, tc.key, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s{domain=test,key=%q} = %v, want %v", name, tc.key, got, tc.want)
		}
	}
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	ts := httptest.NewServer(h.srv.Handler())
	t.Cleanup(ts.Close)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(ts.URL+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	req := `{"domain": "test", "descriptors": [{"entries": [{"key": "general", "value": "g"}]}]}`
	if code, body := post(req); code != 200 || !strings.Contains(body, `"overallCode":"OK"`) {
		t.Errorf("POST /json = %d %s, want 200 OK", code, body)
	}
	if code, body := post(req); code != 429 || !strings.Contains(body, `"overallCode":"OVER_LIMIT"`) {
		t.Errorf("POST /json = %d %s, want 429 OVER_LIMIT", code, body)
	}
	for _, bad := range []string{`{"domain": ""}`, `not json`, `{"domain": "test"}`} {
		if code, body := post(bad); code != 400 {
			t.Errorf("POST /json %s = %d %s, want 400", bad, code, body)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthcheck"); code != 200 || body != "OK" {
		t.Errorf("GET /healthcheck = %d %q, want 200 OK", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `ratelimit_service_rate_limit_over_limit{domain="test",key1="general",key2=""} 1`) {
		t.Errorf("GET /metrics = %d, want over_limit for general in:\n%s", code, body)
	}
	h.srv.Shutdown()
	if code, _ := get("/healthcheck"); code != 500 {
		t.Errorf("GET /healthcheck after Shutdown = %d, want 500", code)
	}
}

func TestGRPCHealth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	hc := healthpb.NewHealthClient(h.conn)
	for _, svc := range []string{"", rls.ServiceName} {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, %v; want SERVING", svc, resp, err)
		}
	}
	h.srv.Shutdown()
	resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Check after Shutdown = %v, %v; want NOT_SERVING", resp, err)
	}
}

func TestReload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	runSteps(t, h, []step{{0, d("user", "u"), st{ok, 2, 3, 30}}})

	// A good change: user becomes 10 a minute, and a new domain appears.
	writeConfig(t, h.dir, "test.yaml", strings.Replace(testConfig, "requests_per_unit: 3", "requests_per_unit: 10", 1))
	writeConfig(t, h.dir, "other.yml", "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	if err := h.srv.Load(h.dir); err != nil {
		t.Fatalf("Load(good) = %v", err)
	}
	runSteps(t, h, []step{{0, d("user", "u"), st{ok, 8, 10, 30}}})
	if got := h.srv.Rules().Domains(); strings.Join(got, ",") != "other,test" {
		t.Errorf("domains = %v, want [other test]", got)
	}

	// A bad change is refused with every problem, and the old config stays.
	writeConfig(t, h.dir, "test.yaml", "domain: test\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	err := h.srv.Load(h.dir)
	if err == nil || !strings.Contains(err.Error(), "test.yaml:4:") {
		t.Fatalf("Load(bad) = %v, want an error at test.yaml:4", err)
	}
	runSteps(t, h, []step{{0, d("user", "u"), st{ok, 7, 10, 30}}})
	if got := metricValue(h.srv, "ratelimit_service_config_load_error"); got != 1 {
		t.Errorf("config_load_error = %v, want 1", got)
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, rls.Options{})
	if err := h.srv.Load(h.dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Watch(ctx, h.dir, 5*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch = %v", err)
		}
	}()
	first := h.srv.Rules()

	// A bad edit: logged, ignored.
	writeConfig(t, h.dir, "test.yaml", "domain: [\n")
	waitFor(t, func() bool { return metricValue(h.srv, "ratelimit_service_config_load_error") >= 1 })
	if h.srv.Rules() != first {
		t.Fatal("a bad edit replaced the config")
	}
	// A good edit is picked up.
	writeConfig(t, h.dir, "test.yaml", strings.Replace(testConfig, "requests_per_unit: 3", "requests_per_unit: 10", 1))
	waitFor(t, func() bool { return h.srv.Rules() != first })
	runSteps(t, h, []step{{0, d("user", "u"), st{ok, 9, 10, 30}}})
}

// waitFor polls cond for up to a minute (a bound, not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gatherOne returns the value of counter name{domain="test",key=key}, or
// in the envoy scheme, of name{domain="test",key1=…,key2=…} with key1.key2 =
// key.
func gatherOne(h *rls.Server, name, key string) (float64, error) {
	mfs, err := h.Registry().Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got, ok := labels["key"]
			if !ok { // MetricLabelsEnvoy
				got = labels["key1"]
				if k2 := labels["key2"]; k2 != "" {
					got += "." + k2
				}
			}
			if labels["domain"] == "test" && got == key {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no such series")
}

// metricValue returns the value of an unlabelled counter, or 0.
func metricValue(h *rls.Server, name string) float64 {
	mfs, _ := h.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func TestMain(m *testing.M) { redistest.Main(m) }
