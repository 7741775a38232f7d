package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// GitHub's rule, with a cap of 1 instead of 100: while a caller's request
// is in flight, its next one is answered 429; another caller is served.
func ExampleInFlight() {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	mw := &httplimit.InFlight{Store: store, Max: 1}

	var inner http.Handler
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Inner") == "" { // while this request is in flight, the same caller calls again
			for _, ip := range []string{"192.0.2.7", "192.0.2.8"} {
				r2 := httptest.NewRequest("GET", "/", nil)
				r2.Header.Set("X-Inner", "1")
				r2.RemoteAddr = ip + ":4711"
				w2 := httptest.NewRecorder()
				inner.ServeHTTP(w2, r2)
				fmt.Println(ip, w2.Code, w2.Header().Get("Retry-After"), w2.Header().Get("RateLimit"))
			}
		}
	}))
	inner = h
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.7:4711"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"))
	// Output:
	// 192.0.2.7 429 1 "in-flight";r=0
	// 192.0.2.8 200  "in-flight";r=0
	// 200 "in-flight";q=1;qu="concurrent-requests"
}

// A fleet cap of 1 with nothing reserved: while one request is in
// flight, the next is shed with 503 and Retry-After, whatever its class.
func ExampleShedder() {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	classes, _ := shed.NewClasses("test", "get", "post", "critical")
	fleet, _ := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 1, Classes: classes})
	get, _ := classes.Lookup("get")
	mw := &httplimit.Shedder{
		Fleet:      fleet,
		Priority:   httplimit.Priority{Classes: classes, Methods: map[string]shed.Class{"GET": get}, Default: classes.Last()},
		RetryAfter: 2 * time.Second,
	}
	var h http.Handler
	h = mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Inner") == "" {
			r2 := httptest.NewRequest("GET", "/", nil)
			r2.Header.Set("X-Inner", "1")
			w2 := httptest.NewRecorder()
			h.ServeHTTP(w2, r2)
			fmt.Println("while busy:", w2.Code, "Retry-After", w2.Header().Get("Retry-After"), w2.Body.String())
		}
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println("first:", w.Code)
	// Output:
	// while busy: 503 Retry-After 2 {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the fleet is at capacity: \"get\" requests are being shed"}
	//
	// first: 200
}
