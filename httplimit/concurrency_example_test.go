package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
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
	// while busy: 503 Retry-After 2 {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the fleet is at capacity: \"get\" requests are being shed","policy":"shed"}
	//
	// first: 200
}

// An adaptive limit in front of a handler: over the limit, a request is answered
// 503 with Retry-After and a problem+json body, and the handler is not
// called.
func ExampleAdaptive() {
	l := adaptive.NewVegas(adaptive.VegasOptions{LimiterOptions: adaptive.LimiterOptions{Initial: 1, Max: 1}})
	release := make(chan struct{})
	started := make(chan struct{})
	h := (&httplimit.Adaptive{Limiter: l}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "ok\n")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	first := make(chan string)
	go func() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			first <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- resp.Status + " " + string(b)
	}()
	<-started // the one slot is taken
	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	fmt.Print(string(body))
	close(release)
	fmt.Print(<-first)
	// Output:
	// 503 Service Unavailable 1 application/problem+json
	// {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the server is at its concurrency limit; retry after the delay in Retry-After","policy":"adaptive"}
	// 200 OK ok
}
