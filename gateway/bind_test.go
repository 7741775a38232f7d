package gateway_test

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// prefetchGatewayConfig has a route under a prefetched rule (one global key, hot)
// and a route under an exact per-IP rule, on STORE.
const prefetchGatewayConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
store: STORE
routes:
  - path: /hot
    rate_limits:
      - actions:
          - generic_key: {descriptor_value: hot}
  - path: /ip
    rate_limits:
      - actions:
          - remote_address: {}
rules:
  domain: prefetch
  descriptors:
    - key: generic_key
      value: hot
      rate_limit: {name: hot, algorithm: token_bucket, unit: second, requests_per_unit: 100000, burst: 1000000, prefetch: true}
    - key: remote_address
      rate_limit: {name: per-ip, unit: hour, requests_per_unit: 5}
`

// TestPrefetchRuleGateway: sluice serve decides a prefetch: true rule through
// the Redis store's prefetch view, a hot key's requests in process once it
// holds a slice (sluice_redis_prefetch_*), while the per-IP rule stays exact; on
// the memory store the rule is exact and the gateway warns once, naming
// the rule's file:line.
func TestPrefetchRuleGateway(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: no Redis")
		}
		redistest.Require(t)
		t.Parallel()
		cfg := strings.Replace(prefetchGatewayConfig, "STORE", redistest.Start(t).URL()+"?timeout=5s", 1)
		s := startWith(t, cfg, gateway.Options{})
		c := clientFrom(t, "127.0.0.3")
		const n = 400
		for i := range n {
			if r := get(t, c, s.url+"/hot"); r.code != 200 {
				t.Fatalf("request %d to the prefetched rule: %d, want 200 (far within its burst)", i, r.code)
			}
		}
		// Every request of the hot key was decided by the prefetch view: in
		// process (local), by a slice taken for it, or exactly while the
		// key was still cold. How many were local depends on how many
		// requests a slice's lifetime (100 ms) sees, which a loaded machine
		// lowers; some must be (rules' and rls's tests, in process, see
		// most).
		local, _ := strconv.Atoi(metric(t, s, "sluice_redis_prefetch_local_total "))
		exact, _ := strconv.Atoi(metric(t, s, "sluice_redis_prefetch_exact_total "))
		slices, _ := strconv.Atoi(metric(t, s, "sluice_redis_prefetch_slices_total "))
		t.Logf("prefetched rule, %d requests: %d local, %d exact, %d slices", n, local, exact, slices)
		if local+exact+slices != n || local == 0 {
			t.Errorf("prefetched rule: %d local + %d exact + %d slices for %d requests; want all through the view, some local", local, exact, slices, n)
		}
		var got []int
		for range 7 {
			got = append(got, get(t, c, s.url+"/ip").code)
		}
		if fmt.Sprint(got) != "[200 200 200 200 200 429 429]" {
			t.Errorf("exact per-IP rule: %v, want exactly 5 admitted", got)
		}
		if after, _ := strconv.Atoi(metric(t, s, "sluice_redis_prefetch_local_total ")); after != local {
			t.Errorf("the exact rule's requests went through the prefetch view: local %d, then %d", local, after)
		}
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		var logs lockedBuffer
		cfg := strings.Replace(prefetchGatewayConfig, "STORE", "memory", 1)
		s := startWith(t, cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		c := clientFrom(t, "127.0.0.4")
		if r := get(t, c, s.url+"/hot"); r.code != 200 {
			t.Fatalf("prefetched rule on the memory store: %d, want 200", r.code)
		}
		if got := logs.String(); strings.Count(got, "prefetch: true has no effect on the memory store") != 1 || !strings.Contains(got, "gateway.yaml:") || !strings.Contains(got, "rule=prefetch.generic_key_hot") {
			t.Errorf("log:\n%s\nwant one warning naming prefetch.generic_key_hot at gateway.yaml:LINE", got)
		}
	})
}

// TestPrefetchDeprecatedSpellings: lease: true (a rule's) and lease=on (the
// store URL's), prefetch's old spellings, still load: the config's
// Warnings (what sluice check prints) name each at its file:line, and the
// gateway logs the rule's once at load.
func TestPrefetchDeprecatedSpellings(t *testing.T) {
	t.Parallel()
	old := strings.Replace(prefetchGatewayConfig, "prefetch: true", "lease: true", 1)
	cfg, err := gateway.Parse("gateway.yaml", []byte(strings.Replace(old, "STORE", "redis://127.0.0.1:1?lease=on", 1)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"gateway.yaml:5: store: warning: URL parameter lease is deprecated (a lease is now only the in-flight slot): write prefetch=on, which means the same",
		"gateway.yaml:20: rules.descriptors[0].rate_limit.lease: warning: lease is deprecated (it now means the in-flight slot only): write prefetch: true, which means the same",
	}
	if fmt.Sprint(cfg.Warnings) != fmt.Sprint(want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(cfg.Warnings, "\n"), strings.Join(want, "\n"))
	}
	if r := cfg.Rules.PrefetchRules(); len(r) != 1 {
		t.Errorf("PrefetchRules: %v, want the lease: true rule", r)
	}
	var logs lockedBuffer
	s := startWith(t, strings.Replace(old, "STORE", "memory", 1), gateway.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if r := get(t, clientFrom(t, "127.0.0.5"), s.url+"/hot"); r.code != 200 {
		t.Fatalf("lease: true rule: %d, want 200", r.code)
	}
	if got := logs.String(); strings.Count(got, "lease is deprecated") != 1 || !strings.Contains(got, "gateway.yaml:20 ") {
		t.Errorf("log:\n%s\nwant one deprecation warning at gateway.yaml:20", got)
	}
}
