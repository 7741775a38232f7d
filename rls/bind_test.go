package rls_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// prefetchConfig has a hot rule with prefetch: true and an exact rule, as
// docs/rules.md shows them.
const prefetchConfig = `domain: prefetch
descriptors:
  - key: tenant
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 100000
      burst: 1000000
      prefetch: true
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 50
`

// redisCalls is the number of commands redis-server ran, from INFO
// commandstats, INFO itself excluded.
func redisCalls(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	reply, err := s.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(reply.(string), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		c, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		n += c
	}
	return n
}

// TestPrefetchRuleRedis: on its own redis-server, a config with a prefetched rule
// and an exact one. The prefetched rule's hot key is answered mostly in
// process: redis-server runs far fewer commands than decisions (INFO
// commandstats). The exact rule costs a command a decision at least and
// admits exactly its limit, then OVER_LIMIT.
func TestPrefetchRuleRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no Redis")
	}
	redistest.Require(t)
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	store, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prefetched, err := redisstore.NewPrefetch(store, redisstore.PrefetchOptions{ExactOthers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prefetched.Close()
	cfg, err := rules.Parse("prefetch.yaml", []byte(prefetchConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	s, err := rls.New(store, set, rls.Options{Prefetch: prefetched, Headers: header.Off})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ask := func(key string, n int) (ok, over int) {
		t.Helper()
		req := &pb.RateLimitRequest{Domain: "prefetch", Descriptors: []*commonpb.RateLimitDescriptor{d(key, "acme")}}
		for range n {
			resp, err := s.ShouldRateLimit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.OverallCode == pb.RateLimitResponse_OK {
				ok++
			} else {
				over++
			}
		}
		return ok, over
	}
	const n = 2000
	c0 := redisCalls(t, srv)
	if ok, _ := ask("tenant", n); ok != n {
		t.Errorf("prefetched rule: %d of %d OK, within its burst", ok, n)
	}
	hot := redisCalls(t, srv) - c0
	st := prefetched.Stats()
	t.Logf("prefetched rule: %d decisions, %d redis-server commands; lease stats %+v", n, hot, st)
	if hot > n/4 || st.Local < n/2 {
		t.Errorf("prefetched rule: %d redis-server commands and %d local decisions for %d decisions; want most local", hot, st.Local, n)
	}
	c1 := redisCalls(t, srv)
	if ok, over := ask("user", 80); ok != 50 || over != 30 {
		t.Errorf("exact rule: %d OK and %d OVER_LIMIT of 80, want exactly 50 and 30", ok, over)
	}
	exact := redisCalls(t, srv) - c1
	t.Logf("exact rule: 80 decisions, %d redis-server commands", exact)
	if exact < 80 {
		t.Errorf("exact rule: %d redis-server commands for 80 decisions, want one each at least", exact)
	}
	if st2 := prefetched.Stats(); st2.Local+st2.Exact != st.Local+st.Exact {
		t.Errorf("the exact rule went through the prefetch view: %+v, then %+v", st, st2)
	}
}

// TestPrefetchRuleMemoryWarns: without a prefetch view (the memory store), a
// prefetch: true rule is decided exactly, and each load says so once per
// rule, with its file:line.
func TestPrefetchRuleMemoryWarns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prefetch.yaml"), []byte(prefetchConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	store := memstore.New(memstore.Options{})
	defer store.Close()
	s, err := rls.New(store, nil, rls.Options{Headers: header.Off, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Load(dir); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "prefetch.yaml")
	if got := logs.String(); strings.Count(got, "prefetch: true has no effect") != 1 || !strings.Contains(got, "at="+file+":3") || !strings.Contains(got, "rule=prefetch.tenant") {
		t.Errorf("log:\n%s\nwant one warning for prefetch.tenant at %s:3", got, file)
	}
	if s.Rules().Store() != store {
		t.Errorf("the loaded rules are not bound to the store")
	}
	req := &pb.RateLimitRequest{Domain: "prefetch", Descriptors: []*commonpb.RateLimitDescriptor{d("tenant", "acme")}, HitsAddend: 1000000}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := s.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != want {
			t.Errorf("request %d of the whole burst: %v, want %v (exact)", i, resp.OverallCode, want)
		}
	}
}

// TestPrefetchDeprecatedLease: lease: true, prefetch's old spelling, still
// sends the rule to the prefetch store, and the load says it is deprecated
// in one warning line with its file:line; a reload of the same file does
// not say it again.
func TestPrefetchDeprecatedLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "prefetch.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(prefetchConfig, "prefetch: true", "lease: true", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	store, pf := memstore.New(memstore.Options{}), memstore.New(memstore.Options{})
	defer store.Close()
	defer pf.Close()
	s, err := rls.New(store, nil, rls.Options{Prefetch: pf, Headers: header.Off, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if err := s.Load(dir); err != nil {
			t.Fatal(err)
		}
	}
	if got := logs.String(); strings.Count(got, "level=WARN") != 1 || strings.Count(got, "lease is deprecated") != 1 || !strings.Contains(got, "at="+file+":9") || !strings.Contains(got, "write prefetch: true") {
		t.Errorf("log:\n%s\nwant one deprecation warning at %s:9", got, file)
	}
	req := &pb.RateLimitRequest{Domain: "prefetch", Descriptors: []*commonpb.RateLimitDescriptor{d("tenant", "acme")}}
	if resp, err := s.ShouldRateLimit(context.Background(), req); err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit: %v, %v", resp, err)
	}
	if store.Len() != 0 || pf.Len() != 1 {
		t.Errorf("store holds %d keys, the prefetch store %d; want the lease: true rule's key in the prefetch store", store.Len(), pf.Len())
	}
}
