package httplimit_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkRefusal is the refusal path (a flood's): one rule that denies
// every request (a limit of 1 an hour, spent), its 429 with the IETF
// headers and the problem body written.
func BenchmarkRefusal(b *testing.B) { benchmarkRefusal(b, nil) }

// benchmarkRefusal is BenchmarkRefusal's flood, answered with denial (nil:
// the problem body).
func benchmarkRefusal(b *testing.B, denial *httplimit.Denial) {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	set := mustRules(b, `
domain: test
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`)
	h := (&httplimit.Middleware{Store: store, Rules: set, Domain: "test", Descriptors: identityDescriptors(), Denial: denial}).Handler(ok)
	for i := range 250 { // every client's one request of the hour, spent
		h.ServeHTTP(&nopWriter{h: http.Header{}}, &http.Request{Method: "GET", RemoteAddr: "10.0.0." + strconv.Itoa(i) + ":1", URL: &url.URL{Path: "/"}})
	}
	b.ReportAllocs()
	serveParallel(b, h)
}

// BenchmarkInFlightMiddleware is the in-flight cap's admitted path on the
// memory store: identify, a lease, the RateLimit headers, the release.
func BenchmarkInFlightMiddleware(b *testing.B) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	b.ReportAllocs()
	serveParallel(b, (&httplimit.InFlight{Store: store, Max: 1 << 20}).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
}

// BenchmarkAdaptiveMiddleware is the adaptive limit's admitted path: a
// token, the response recorder, the release by the answer.
func BenchmarkAdaptiveMiddleware(b *testing.B) {
	lim := adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: adaptive.LimiterOptions{Initial: 1 << 20, Max: 1 << 20}})
	b.ReportAllocs()
	serveParallel(b, (&httplimit.Adaptive{Limiter: lim}).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
}
