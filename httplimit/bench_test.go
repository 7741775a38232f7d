package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/memstore"
)

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkMiddleware measures the hot path: identity, one descriptor, one
// token bucket on the memory store, IETF headers; 1000 clients.
func BenchmarkMiddleware(b *testing.B) {
	const big = `
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
	// -observe: with an Observe (as the gateway has), timing every
	// decision or (-sampled) one in SuggestedLatencySampling.
	for _, tc := range []struct {
		name     string
		ds       []action.Descriptor
		observe  bool
		sampling int
	}{
		{"one-rule", identityDescriptors(), false, 0},
		{"two-rules", identityDescriptors(action.GenericKey{DescriptorValue: "global"}), false, 0},
		{"one-rule-observe", identityDescriptors(), true, 0},
		{"one-rule-observe-sampled", identityDescriptors(), true, httplimit.SuggestedLatencySampling},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := memstore.New(memstore.Options{})
			defer store.Close()
			mw := &httplimit.Middleware{Store: store, Rules: mustRules(b, big), Domain: "test", Descriptors: tc.ds,
				LatencySampling: tc.sampling}
			if tc.observe {
				var lat atomic.Int64
				mw.Observe = func(e httplimit.Event) { lat.Add(int64(e.Latency)) }
			}
			h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			b.ReportAllocs()
			// CPU time per operation, next to the wall time: on a machine
			// shared with other work it is the steadier of the two.
			if c0, ok := cpuTime(); ok {
				defer func() {
					if c1, ok := cpuTime(); ok {
						b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
					}
				}()
			}
			serveParallel(b, h)
		})
	}
}

// serveParallel runs h on b's parallel goroutines, each a client of its
// own among 250 (10.0.0.x).
func serveParallel(b *testing.B, h http.Handler) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0." + strconv.Itoa(int(n.Add(1)%250)) + ":1"
		w := &nopWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	})
}
