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

// Requests whose handler fails with a 5xx are not counted: RefundOn gives
// their charge back, so a client retrying through an outage keeps its
// quota for when the service returns. RefundBudget bounds how much comes
// back: here the limit itself (2 a minute), so the third failure's charge
// stands, and of the two successes only the first finds room.
func ExampleMiddleware_refundOn() {
	cfg, err := rules.Parse("rules.yaml", []byte(`
domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: fixed_window, unit: minute, requests_per_unit: 2}
`))
	if err != nil {
		panic(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	defer store.Close()
	mw := &httplimit.Middleware{
		Store:        store,
		Rules:        set,
		Domain:       "api",
		Descriptors:  []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}},
		RefundOn:     httplimit.RefundStatuses(500, 502, 503, 504),
		RefundBudget: 1,
	}
	down := true
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	for i := range 5 {
		down = i < 3
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:4711"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// 503
	// 503
	// 503
	// 200
	// 429
}
