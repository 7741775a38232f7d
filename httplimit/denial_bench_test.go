package httplimit_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkDenialRefusal is BenchmarkRefusal with a configured denial: a
// 503 with a JSON body holding both placeholders.
func BenchmarkDenialRefusal(b *testing.B) {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	set := mustRules(b, `
domain: test
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`)
	d, err := httplimit.NewDenial(503, `{"error":"slow down","policy":"{policy}","retry_after":{retry_after}}`, "application/json")
	if err != nil {
		b.Fatal(err)
	}
	h := (&httplimit.Middleware{Store: store, Rules: set, Domain: "test", Descriptors: identityDescriptors(), Denial: d}).Handler(ok)
	for i := range 250 { // every client's one request of the hour, spent
		h.ServeHTTP(&nopWriter{h: http.Header{}}, &http.Request{Method: "GET", RemoteAddr: "10.0.0." + strconv.Itoa(i) + ":1", URL: &url.URL{Path: "/"}})
	}
	b.ReportAllocs()
	serveParallel(b, h)
}
