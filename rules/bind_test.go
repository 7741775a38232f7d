package rules_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rules"
)

const bindYAML = `
domain: d
descriptors:
  - key: gcra
    rate_limit: {algorithm: gcra, unit: second, requests_per_unit: 5, burst: 3}
  - key: bucket
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 20, burst: 4, prefetch: true}
  - key: leaky
    rate_limit: {algorithm: leaky_bucket, unit: second, requests_per_unit: 2, burst: 3}
  - key: window
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: counter
    rate_limit: {algorithm: sliding_window_counter, window: 3s, requests_per_unit: 4}
  - key: log
    rate_limit: {algorithm: sliding_window_log, window: 2s, requests_per_unit: 3}
  - key: open
    rate_limit: {unlimited: true}
  - key: daily
    quota: {period: day, limit: 6}
`

func bindSet(t testing.TB, yaml string) *rules.Set {
	t.Helper()
	cfg, err := rules.Parse("bind.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestBindDecidesAsApply: a bound Set decides every request (each
// algorithm, peeks, costs, a leaky bucket's MaxDelay, refunds, an
// adjusted limit, an override, a quota) exactly as the store's Apply
// decides the same request under an unbound Set, on two memory stores
// driven by one clock.
func TestBindDecidesAsApply(t *testing.T) {
	t.Parallel()
	set := bindSet(t, bindYAML)
	now := time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	bs, ps := memstore.New(memstore.Options{Now: clock}), memstore.New(memstore.Options{Now: clock})
	defer bs.Close()
	defer ps.Close()
	bound, err := set.Bind(bs, rules.BindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound.Store() != bs || set.Store() != nil {
		t.Fatalf("Store() = %v and %v: want the bound Set's store and nil for the Set it came from", bound.Store(), set.Store())
	}
	ctx := context.Background()
	keys := []string{"gcra", "bucket", "leaky", "window", "counter", "log", "open", "daily", "none"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		d := rules.Descriptor{Entries: []rules.Entry{{Key: keys[rng.IntN(len(keys))], Value: string(rune('a' + rng.IntN(3)))}}, Hits: int64(rng.IntN(4))}
		if rng.IntN(10) == 0 {
			d.Override = &ratelimit.Limit{Rate: 3, Period: time.Second}
		}
		in := rules.Input{Domain: "d", Descriptors: []rules.Descriptor{d}, Now: clock}
		bc, err := bound.Resolve(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := set.Resolve(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if bc[0].Kind != pc[0].Kind || bc[0].Request != pc[0].Request {
			t.Fatalf("step %d: bound Set resolved %+v, unbound %+v", i, bc[0], pc[0])
		}
		if bc[0].Kind != rules.Limited {
			continue
		}
		req := bc[0].Request
		switch rng.IntN(8) {
		case 0:
			req.Refund = true
		case 1:
			req.Limit.Rate++ // an adjusted limit (the gateway's admin overrides)
		case 2:
			req.MaxDelay = time.Duration(rng.IntN(2000)) * time.Millisecond
		}
		got, gerr := bc[0].Decide(ctx, bs, req)
		want, werr := pc[0].Decide(ctx, ps, req)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("step %d: %+v: bound decided %+v, %v; Apply %+v, %v", i, req, got, gerr, want, werr)
		}
	}
}

// TestBindPrefetch: a prefetch: true rule decides with BindOptions.Prefetch, the
// others with the store; without Prefetch, every rule decides with the
// store.
func TestBindPrefetch(t *testing.T) {
	t.Parallel()
	set := bindSet(t, bindYAML)
	if lr := set.PrefetchRules(); len(lr) != 1 || lr[0].Key != "d.bucket" || !lr[0].Prefetch {
		t.Fatalf("PrefetchRules() = %v, want d.bucket", lr)
	}
	ctx := context.Background()
	for _, withPrefetched := range []bool{true, false} {
		store, prefetched := memstore.New(memstore.Options{}), memstore.New(memstore.Options{})
		opts := rules.BindOptions{}
		if withPrefetched {
			opts.Prefetch = prefetched
		}
		bound, err := set.Bind(store, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"bucket", "gcra", "bucket"} {
			cs, err := bound.Resolve(nil, rules.Input{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: k, Value: "v"}}, Hits: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs[0].Decide(ctx, store, cs[0].Request); err != nil {
				t.Fatal(err)
			}
		}
		wantStore, wantPrefetched := 1, 1 // gcra's key; bucket's
		if !withPrefetched {
			wantStore, wantPrefetched = 2, 0
		}
		if store.Len() != wantStore || prefetched.Len() != wantPrefetched {
			t.Errorf("with prefetched store %v: store holds %d keys, prefetched %d; want %d and %d", withPrefetched, store.Len(), prefetched.Len(), wantStore, wantPrefetched)
		}
		store.Close()
		prefetched.Close()
	}
}

// TestBindRefused: a limit the store refuses to bind is a problem at the
// rule's file:line, and no Set is returned.
func TestBindRefused(t *testing.T) {
	t.Parallel()
	set := bindSet(t, bindYAML)
	store := memstore.New(memstore.Options{})
	defer store.Close()
	bound, err := set.Bind(store, rules.BindOptions{Variant: func(r *rules.Rule) (ratelimit.Algorithm, ratelimit.Limit, bool) {
		return r.Algorithm, ratelimit.Limit{Rate: -1, Period: time.Second}, r.Key == "d.window"
	}})
	var errs *rules.Errors
	if bound != nil || !errors.As(err, &errs) || len(*errs) != 1 || !errors.Is(err, rules.ErrInvalid) {
		t.Fatalf("Bind = %v, %v; want one problem", bound, err)
	}
	if p := (*errs)[0]; p.File != "bind.yaml" || p.Line != 10 || !strings.Contains(p.Error(), "bind.yaml:10: d.window: store refused the rule") {
		t.Errorf("problem %q, want it at bind.yaml:10 naming d.window", p.Error())
	}
	if _, err := set.Bind(nil, rules.BindOptions{}); err == nil {
		t.Error("Bind(nil) succeeded")
	}
}

// TestBindPrefetchRedis: on one real redis-server, a prefetched rule and an exact
// rule in one config. The prefetched rule's hot key is answered mostly in
// process (few Redis requests for its decisions); the exact rule's every
// decision is a Redis request, and it admits exactly its limit.
func TestBindPrefetchRedis(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Shared(t)
	ctx := context.Background()
	store, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Prefix: redistest.Prefix(t), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prefetched, err := redisstore.NewPrefetch(store, redisstore.PrefetchOptions{ExactOthers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prefetched.Close()
	set := bindSet(t, `
domain: d
descriptors:
  - key: tenant
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 100000, burst: 1000000, prefetch: true}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 50}
`)
	bound, err := set.Bind(store, rules.BindOptions{Prefetch: prefetched})
	if err != nil {
		t.Fatal(err)
	}
	calls := func() uint64 { st := store.Stats(); return st.Requests + st.Commands }
	decide := func(key string, n int) (admitted int) {
		t.Helper()
		in := rules.Input{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: key, Value: "acme"}}, Hits: 1}}}
		var cs []rules.Check
		for range n {
			cs, err = bound.Resolve(cs[:0], in)
			if err != nil {
				t.Fatal(err)
			}
			d, err := cs[0].Decide(ctx, store, cs[0].Request)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		return admitted
	}
	const n = 2000
	c0 := calls()
	if got := decide("tenant", n); got != n {
		t.Errorf("prefetched rule admitted %d of %d, within its burst", got, n)
	}
	prefetchedCalls := calls() - c0
	st := prefetched.Stats()
	t.Logf("prefetched rule: %d decisions, %d Redis requests; prefetch stats %+v", n, prefetchedCalls, st)
	if st.Local < n/2 || prefetchedCalls > n/2 {
		t.Errorf("prefetched rule: %d local decisions and %d Redis requests for %d; want most local", st.Local, prefetchedCalls, n)
	}
	c1 := calls()
	if got := decide("user", 80); got != 50 {
		t.Errorf("exact rule admitted %d of 80, want exactly its limit 50", got)
	}
	if exact := calls() - c1; exact < 80 {
		t.Errorf("exact rule: %d Redis requests for 80 decisions, want one each at least", exact)
	}
	if st2 := prefetched.Stats(); st2.Local+st2.Exact != st.Local+st.Exact {
		t.Errorf("the exact rule went through the prefetch view: %+v, then %+v", st, st2)
	}
}

// BenchmarkResolveDecide is a front door's whole use of rules for one
// descriptor on the memory store, 1000 keys: resolve it, then charge the
// store through an unbound Set (Store.Apply) or a bound one (the rule's
// prepared ratelimit.Bound).
func BenchmarkResolveDecide(b *testing.B) {
	set := bindSet(b, bindYAML)
	for _, alg := range []string{"gcra", "window"} {
		for _, mode := range []string{"apply", "bound"} {
			b.Run(alg+"/"+mode, func(b *testing.B) {
				store := memstore.New(memstore.Options{})
				defer store.Close()
				s := set
				if mode == "bound" {
					var err error
					if s, err = set.Bind(store, rules.BindOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				ins := make([]rules.Input, 1000)
				for i := range ins {
					ins[i] = rules.Input{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: alg, Value: "u" + string(rune('a'+i%26)) + string(rune('a'+i/26))}}, Hits: 1}}}
				}
				ctx := context.Background()
				b.ReportAllocs()
				if c0, ok := cpuTime(); ok {
					defer func() {
						if c1, ok := cpuTime(); ok {
							b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
						}
					}()
				}
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					cs := make([]rules.Check, 0, 4)
					i := rand.IntN(len(ins))
					for pb.Next() {
						i = (i + 1) % len(ins)
						cs, _ = s.Resolve(cs[:0], ins[i])
						if _, err := cs[0].Decide(ctx, store, cs[0].Request); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// applyOnly is a store with its Binder hidden: a Set bound to it decides
// every request with Apply, as before Bind.
type applyOnly struct{ ratelimit.Store }

// BenchmarkResolveDecidePaired compares the two paths in one goroutine,
// alternating blocks of 256 decisions through an unbound path (Apply) and
// a bound one, and reports the fastest block of each per decision and
// their ratio. On a machine shared with other work, wall and CPU time per
// operation vary more between runs than the difference; the fastest of
// many alternating blocks is what each path costs when nothing else
// intervenes.
func BenchmarkResolveDecidePaired(b *testing.B) {
	set := bindSet(b, bindYAML)
	for _, alg := range []string{"gcra", "window"} {
		b.Run(alg, func(b *testing.B) {
			store := memstore.New(memstore.Options{})
			defer store.Close()
			bound, err := set.Bind(store, rules.BindOptions{})
			if err != nil {
				b.Fatal(err)
			}
			applied, err := set.Bind(applyOnly{store}, rules.BindOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ins := make([]rules.Input, 1000)
			for i := range ins {
				ins[i] = rules.Input{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: alg, Value: "u" + string(rune('a'+i%26)) + string(rune('a'+i/26))}}, Hits: 1}}}
			}
			ctx := context.Background()
			cs := make([]rules.Check, 0, 4)
			i := 0
			block := func(s *rules.Set) time.Duration {
				t0 := time.Now()
				for range 256 {
					i = (i + 1) % len(ins)
					cs, _ = s.Resolve(cs[:0], ins[i])
					if _, err := cs[0].Decide(ctx, store, cs[0].Request); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(t0)
			}
			minA, minB := time.Duration(1<<62), time.Duration(1<<62)
			b.ReportAllocs()
			for b.Loop() {
				minA = min(minA, block(applied))
				minB = min(minB, block(bound))
			}
			b.ReportMetric(float64(minA)/256, "apply-ns/op")
			b.ReportMetric(float64(minB)/256, "bound-ns/op")
			b.ReportMetric(float64(minB)/float64(minA), "bound/apply")
		})
	}
}
