package rls_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// countingStore counts the calls that reach a real store.
type countingStore struct {
	ratelimit.Store
	calls atomic.Int64
}

func (s *countingStore) Apply(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	s.calls.Add(1)
	return s.Store.Apply(ctx, r)
}

const localCacheConfig = `domain: lc
descriptors:
  - key: api_key
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: bucket
    rate_limit:
      algorithm: token_bucket
      unit: minute
      requests_per_unit: 6
      burst: 3
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 1
`

func localCacheServer(t *testing.T, store ratelimit.Store, now *time.Time, size int, sd *rls.Statsd) *rls.Server {
	t.Helper()
	cfg, err := rules.Parse("lc.yaml", []byte(localCacheConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rls.New(store, set, rls.Options{LocalCacheSize: size, Statsd: sd, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestLocalCache: once a fixed window is over, the server answers it
// OVER_LIMIT without calling the store until the window ends, and counts
// those hits as over_limit and over_limit_with_local_cache, in Prometheus
// and statsd, with the cache's own gauges; on the memory store and Redis.
func TestLocalCache(t *testing.T) {
	stores := map[string]func(t *testing.T, now func() time.Time) ratelimit.Store{
		"memory": func(t *testing.T, now func() time.Time) ratelimit.Store {
			s := memstore.New(memstore.Options{Now: now})
			t.Cleanup(func() { s.Close() })
			return s
		},
		"redis": func(t *testing.T, now func() time.Time) ratelimit.Store {
			if testing.Short() {
				t.Skip("-short: no Redis")
			}
			redistest.Require(t)
			s, err := redisstore.Open(context.Background(), redistest.Shared(t).URL(), redisstore.Options{
				Now: now, Prefix: redistest.Prefix(t), Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			now := time.Unix(1772445600, 0) // a minute's and an hour's start
			clock := func() time.Time { return now }
			store := &countingStore{Store: open(t, clock)}
			l := listenStatsd(t)
			sd, err := rls.DialStatsd(l.addr(), rls.StatsdOptions{FlushInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer sd.Close()
			srv := localCacheServer(t, store, &now, 1<<20, sd)
			ctx := context.Background()
			ask := func(hits uint32, wantCode pb.RateLimitResponse_Code, wantReset int64) {
				t.Helper()
				resp, err := srv.ShouldRateLimit(ctx, sdReq("lc", hits, "api_key", "k"))
				if err != nil {
					t.Fatal(err)
				}
				st := resp.Statuses[0]
				if resp.OverallCode != wantCode || st.DurationUntilReset.GetSeconds() != wantReset {
					t.Fatalf("at +%v: %v, reset %ds; want %v, reset %ds", now.Sub(time.Unix(1772445600, 0)),
						resp.OverallCode, st.DurationUntilReset.GetSeconds(), wantCode, wantReset)
				}
			}
			ask(1, pb.RateLimitResponse_OK, 60)
			ask(1, pb.RateLimitResponse_OK, 60)
			ask(1, pb.RateLimitResponse_OVER_LIMIT, 60) // found over: cached
			calls := store.calls.Load()
			now = now.Add(10 * time.Second)
			ask(2, pb.RateLimitResponse_OVER_LIMIT, 50) // from the cache
			ask(0, pb.RateLimitResponse_OVER_LIMIT, 50) // hits_addend 0 is 1
			if got := store.calls.Load(); got != calls {
				t.Errorf("the store was called %d times for cached denials, want 0", got-calls)
			}
			now = now.Add(50 * time.Second) // the next window
			ask(1, pb.RateLimitResponse_OK, 60)
			if store.calls.Load() == calls {
				t.Error("the store was not called after the window ended")
			}
			st, ok := srv.LocalCacheStats()
			want := rls.LocalCacheStats{Hits: 2, Misses: 4, Lookups: 6, Expired: 1, Entries: 0}
			if st.Bytes != 0 || !ok || st.Hits != want.Hits || st.Misses != want.Misses || st.Lookups != want.Lookups ||
				st.Expired != want.Expired || st.Entries != want.Entries {
				t.Errorf("stats %+v, want %+v", st, want)
			}

			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body, _ := io.ReadAll(rec.Body)
			for _, line := range []string{
				`ratelimit_service_rate_limit_over_limit_with_local_cache{domain="lc",key1="api_key",key2=""} 3`,
				`ratelimit_service_rate_limit_over_limit{domain="lc",key1="api_key",key2=""} 4`,
				`ratelimit_service_rate_limit_total_hits{domain="lc",key1="api_key",key2=""} 7`,
				"ratelimit_localcache_hitCount 2",
				"ratelimit_localcache_missCount 4",
				"ratelimit_localcache_expiredCount 1",
				"ratelimit_localcache_entryCount 0",
			} {
				if !strings.Contains(string(body), line+"\n") {
					t.Errorf("/metrics lacks %q:\n%s", line, grepLines(string(body), "api_key"))
				}
			}
			sd.Flush()
			got := statsdValues(t, l.read(t))
			for k, v := range map[string]uint64{
				"ratelimit.service.rate_limit.lc.api_key.over_limit_with_local_cache|c": 3,
				"ratelimit.service.rate_limit.lc.api_key.over_limit|c":                  4,
				"ratelimit.localcache.hitCount|g":                                       2,
				"ratelimit.localcache.lookupCount|g":                                    6,
			} {
				if got[k] != v {
					t.Errorf("statsd %s = %d, want %d", k, got[k], v)
				}
			}
		})
	}
}

// TestLocalCacheBucket: a token bucket's denial is cached until its
// Retry-After, for requests costing at least as much; a cheaper one asks
// the store.
func TestLocalCacheBucket(t *testing.T) {
	now := time.Unix(1772445600, 0)
	clock := func() time.Time { return now }
	mem := memstore.New(memstore.Options{Now: clock})
	defer mem.Close()
	store := &countingStore{Store: mem}
	srv := localCacheServer(t, store, &now, 1<<20, nil)
	ctx := context.Background()
	code := func(hits uint32) pb.RateLimitResponse_Code {
		t.Helper()
		resp, err := srv.ShouldRateLimit(ctx, sdReq("lc", hits, "bucket", "b"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode
	}
	if c := code(2); c != pb.RateLimitResponse_OK {
		t.Fatalf("2 of a burst of 3: %v", c)
	}
	if c := code(2); c != pb.RateLimitResponse_OVER_LIMIT { // 1 left; cached for 10 s
		t.Fatalf("2 more: %v", c)
	}
	calls := store.calls.Load()
	if c := code(3); c != pb.RateLimitResponse_OVER_LIMIT || store.calls.Load() != calls {
		t.Errorf("3 (costlier than the cached denial): %v, %d store calls; want OVER_LIMIT from the cache", c, store.calls.Load()-calls)
	}
	if c := code(1); c != pb.RateLimitResponse_OK || store.calls.Load() != calls+1 {
		t.Errorf("1 (cheaper): %v, %d store calls; want OK from the store", c, store.calls.Load()-calls)
	}
	now = now.Add(20 * time.Second) // 2 tokens back
	if c := code(2); c != pb.RateLimitResponse_OK {
		t.Errorf("after the Retry-After: %v, want OK", c)
	}
}

// TestLocalCacheBound floods the cache with distinct over-limit keys: it
// holds no more bytes than its size and counts what it evicted.
func TestLocalCacheBound(t *testing.T) {
	now := time.Unix(1772445600, 0)
	clock := func() time.Time { return now }
	mem := memstore.New(memstore.Options{Now: clock})
	defer mem.Close()
	const size = rls.MinLocalCacheSize
	srv := localCacheServer(t, mem, &now, size, nil)
	ctx := context.Background()
	const users = 8000 // about twice what fits
	for i := range users {
		resp, err := srv.ShouldRateLimit(ctx, sdReq("lc", 2, "user", fmt.Sprintf("user-%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("user %d: %v", i, resp.OverallCode)
		}
	}
	st, _ := srv.LocalCacheStats()
	if st.Bytes > size || st.Entries == 0 || st.Entries+st.Evictions != users {
		t.Errorf("after %d over-limit keys in %d bytes: %+v; want at most %d bytes, entries + evictions = %d",
			users, size, st, size, users)
	}
	small := localCacheServer(t, mem, &now, 1000, nil) // raised to MinLocalCacheSize, as freecache does
	if _, err := small.ShouldRateLimit(ctx, sdReq("lc", 2, "user", "u")); err != nil {
		t.Fatal(err)
	}
	if st, _ := small.LocalCacheStats(); st.Entries != 1 {
		t.Errorf("a 1000-byte cache holds %d entries after a denial, want 1", st.Entries)
	}
	if _, err := rls.New(mem, nil, rls.Options{LocalCacheSize: -1}); err == nil {
		t.Error("a negative LocalCacheSize: no error")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, ln := range strings.Split(s, "\n") {
		if strings.Contains(ln, sub) {
			out = append(out, ln)
		}
	}
	return strings.Join(out, "\n")
}

// TestLocalCacheForgetsReset: a key reset through the admin API is
// forgotten by the local over-limit cache too, so that its next request
// goes to the store and passes, instead of being answered over from
// memory until its window ends.
func TestLocalCacheForgetsReset(t *testing.T) {
	srv, store, hs := statusServerWith(t, rls.Options{LocalCacheSize: 1 << 20})
	actions, err := control.NewActions(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	const tok = "rls-admin-token-0123456789"
	srv.SetAdmin(tok, store, nil, actions)
	for range 3 {
		hit(t, srv, "remote_address", "10.0.0.9")
	}
	if got := hit(t, srv, "remote_address", "10.0.0.9"); got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("got %v, want over", got)
	}
	if st, _ := srv.LocalCacheStats(); st.Entries != 1 {
		t.Fatalf("local cache after the denial: %+v, want 1 entry", st)
	}
	req, _ := http.NewRequest("POST", hs.URL+"/admin/reset", strings.NewReader(`{"identity":"edge: remote_address=10.0.0.9","rule":"edge.remote_address"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("reset: %d", res.StatusCode)
	}
	if got := hit(t, srv, "remote_address", "10.0.0.9"); got != pb.RateLimitResponse_OK {
		t.Errorf("after reset: got %v, want OK (the local cache kept the denial)", got)
	}
}
