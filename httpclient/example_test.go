package httpclient_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/sluicehq/sluice/httpclient"
)

// A server that says 429 to the first request, with Retry-After: 1.
func newServer() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
}

// The client in five lines: per-host self-limiting, AIMD, jittered backoff,
// Retry-After, retry budget and breaker, all defaults.
func Example() {
	srv := newServer()
	defer srv.Close()

	client := httpclient.NewClient(httpclient.Options{})
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// Observe retries, waits, pauses and breaker transitions, e.g. to count
// them in Prometheus.
func ExampleObserverFunc() {
	srv := newServer()
	defer srv.Close()

	var retries atomic.Int64
	client := httpclient.NewClient(httpclient.Options{
		Observer: httpclient.ObserverFunc(func(e httpclient.Event) {
			if e.Kind == httpclient.Retry {
				retries.Add(1)
				fmt.Printf("retry after attempt %d: %v, waiting %v (Retry-After: %v)\n", e.Attempt, e.Err, e.Delay, e.ServerDelay)
			}
		}),
	})
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", retries.Load(), "retry")
	// Output:
	// retry after attempt 1: httpclient: 429 Too Many Requests, waiting 1s (Retry-After: true)
	// 200 OK after 1 retry
}
