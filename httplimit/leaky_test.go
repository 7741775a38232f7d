package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/memstore"
)

// A leaky_bucket rule delays each request to its slot before next runs,
// and gives up (503) when the request's context ends first.
func TestLeakyBucketDelays(t *testing.T) {
	set := mustRules(t, `
domain: test
descriptors:
  - key: remote_address
    rate_limit: {name: queue, algorithm: leaky_bucket, unit: second, requests_per_unit: 2, burst: 4}
`)
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{SweepInterval: -1})
		defer store.Close()
		var ran []time.Duration
		start := time.Now()
		mw := &httplimit.Middleware{Store: store, Rules: set, Domain: "test",
			Descriptors: []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}}}
		h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = append(ran, time.Since(start)) }))
		for i := range 3 {
			if w := do(h, "192.0.2.1:1"); w.Code != 200 {
				t.Fatalf("request %d: %d, want 200", i, w.Code)
			}
		}
		want := []time.Duration{0, 500 * time.Millisecond, 1000 * time.Millisecond}
		for i := range want {
			if i >= len(ran) || ran[i] != want[i] {
				t.Fatalf("next ran at %v, want %v", ran, want)
			}
		}
		// A request whose context ends before its slot: 503, next not run.
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		ctx, cancel := context.WithCancel(r.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(ctx))
		if w.Code != http.StatusServiceUnavailable || len(ran) != 3 {
			t.Errorf("cancelled while queued: %d, next ran %d times; want 503, 3", w.Code, len(ran))
		}
	})
}
