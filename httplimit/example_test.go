package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rules"
)

// Each client IP gets a bucket of 2 requests, refilled at one a minute; the
// third request in a row is answered 429 with the IETF headers.
func ExampleMiddleware() {
	cfg, err := rules.Parse("rules.yaml", []byte(`
domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: minute, requests_per_unit: 1, burst: 2}
`))
	if err != nil {
		panic(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	defer store.Close()

	mw := &httplimit.Middleware{
		Store:       store,
		Rules:       set,
		Domain:      "api",
		Descriptors: []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}},
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:4711"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "per-ip";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "per-ip";r=0;t=120 Retry-After: ""
	// 429 RateLimit: "per-ip";r=0;t=120 Retry-After: "60"
}
