package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// applyOnly is a store with its ratelimit.Binder hidden: rules bound to it
// are decided by Apply on every request, as before rules.Set.Bind.
type applyOnly struct{ ratelimit.Store }

// BenchmarkMiddlewareBindPaired is BenchmarkMiddleware's one-rule and
// two-rules cases through the rules bound to the memory store (what
// Handler does) and through Apply, in one goroutine, in alternating blocks
// of 256 requests; it reports the fastest block of each per request and
// their ratio (see rules.BenchmarkResolveDecidePaired: on a shared machine
// the difference is smaller than the noise between separate runs).
func BenchmarkMiddlewareBindPaired(b *testing.B) {
	const src = `
domain: test
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
  - key: user
    rate_limit: {name: per-user, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
  - key: generic_key
    value: global
    rate_limit: {name: global, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
`
	for _, tc := range []struct {
		name string
		ds   []action.Descriptor
	}{
		{"one-rule", identityDescriptors()},
		{"two-rules", identityDescriptors(action.GenericKey{DescriptorValue: "global"})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := memstore.New(memstore.Options{})
			defer store.Close()
			set := mustRules(b, src)
			viaApply, err := set.Bind(applyOnly{store}, rules.BindOptions{})
			if err != nil {
				b.Fatal(err)
			}
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
			bound := (&httplimit.Middleware{Store: store, Rules: set, Domain: "test", Descriptors: tc.ds}).Handler(next)
			applied := (&httplimit.Middleware{Store: store, Rules: viaApply, Domain: "test", Descriptors: tc.ds}).Handler(next)
			reqs := make([]*http.Request, 250)
			for i := range reqs {
				reqs[i] = httptest.NewRequest("GET", "/", nil)
				reqs[i].RemoteAddr = "10.0.0." + strconv.Itoa(i) + ":1"
			}
			w := &nopWriter{h: http.Header{}}
			i := 0
			block := func(h http.Handler) time.Duration {
				t0 := time.Now()
				for range 256 {
					i = (i + 1) % len(reqs)
					clear(w.h)
					h.ServeHTTP(w, reqs[i])
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
