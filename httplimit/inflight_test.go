package httplimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
)

// gate is a handler that holds each request until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 100), release: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.entered <- struct{}{}
	<-g.release
	w.Write([]byte("ok"))
}

func serve(h http.Handler, ip, method string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/", nil)
	r.RemoteAddr = ip + ":1234"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Three requests of one caller in flight at once, the fourth is answered
// 429 with Retry-After and a problem+json body; another caller is not
// affected; when one request ends its slot comes back.
func TestInFlightCapsEachCaller(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	g := newGate()
	h := (&httplimit.InFlight{Store: store, Max: 3}).Handler(g)
	var wg sync.WaitGroup
	codes := make(chan int, 4)
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- serve(h, "192.0.2.1", "GET").Code }()
		<-g.entered
	}
	w := serve(h, "192.0.2.1", "GET")
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("4th request: %d %v, want 429 with Retry-After 1 and problem+json", w.Code, w.Header())
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != 429 || p.Policy != "in-flight" {
		t.Errorf("problem %+v (%v), want status 429, policy in-flight", p, err)
	}
	if got := w.Header().Values("RateLimit-Policy"); len(got) != 1 || got[0] != `"in-flight";q=3;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"in-flight";r=0` {
		t.Errorf("RateLimit %q, want r=0", got)
	}
	// Another caller has its own slots.
	go func() { codes <- serve(h, "192.0.2.2", "GET").Code }()
	<-g.entered
	close(g.release)
	wg.Wait()
	for range 4 {
		if c := <-codes; c != 200 {
			t.Errorf("held request: %d, want 200", c)
		}
	}
	// Every lease is back.
	for _, ip := range []string{"192.0.2.1", "192.0.2.2"} {
		if n, _ := store.Peek(context.Background(), "inflight:ip:"+ip); n != 0 {
			t.Errorf("%s: %d in flight after every request ended, want 0", ip, n)
		}
	}
	if w := serve(h, "192.0.2.1", "GET"); w.Code != 200 || w.Header().Get("RateLimit") != `"in-flight";r=2` {
		t.Errorf("after the releases: %d RateLimit %q, want 200 r=2", w.Code, w.Header().Get("RateLimit"))
	}
}

// The lease is released when the handler panics (net/http recovers the
// panic; the slot must not leak).
func TestInFlightReleasedOnPanic(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	h := (&httplimit.InFlight{Store: store, Max: 1}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() { recover() }()
		serve(h, "192.0.2.1", "GET")
	}()
	if n, _ := store.Peek(context.Background(), "inflight:ip:192.0.2.1"); n != 0 {
		t.Fatalf("%d in flight after a panic, want 0", n)
	}
}

// A request longer than the lease's TTL keeps its slot: the lease is
// renewed every TTL/2 while the handler runs, and released at its end.
func TestInFlightRenewsLongRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := inflight.NewMemory(inflight.MemoryOptions{})
		defer store.Close()
		h := (&httplimit.InFlight{Store: store, Max: 1, TTL: 2 * time.Second}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(10 * time.Second)
		}))
		done := make(chan int)
		go func() { done <- serve(h, "192.0.2.1", "GET").Code }()
		for range 4 {
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if n, _ := store.Peek(context.Background(), "inflight:ip:192.0.2.1"); n != 1 {
				t.Fatalf("%d in flight during a long request, want 1 (renewed)", n)
			}
			if w := serve(h, "192.0.2.1", "GET"); w.Code != 429 {
				t.Fatalf("second request during a long one: %d, want 429", w.Code)
			}
		}
		if c := <-done; c != 200 {
			t.Errorf("long request: %d", c)
		}
		if n, _ := store.Peek(context.Background(), "inflight:ip:192.0.2.1"); n != 0 {
			t.Errorf("%d in flight after the long request, want 0", n)
		}
	})
}

func TestInFlightStoreErrors(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	store.Close() // every call fails with ErrClosed
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, tc := range []struct {
		policy ratelimit.FailurePolicy
		want   int
	}{
		{ratelimit.FailError, 503}, {ratelimit.FailDeny, 503}, {ratelimit.FailAllow, 200}, {ratelimit.FailLocal, 200},
	} {
		var got []httplimit.Outcome
		h := (&httplimit.InFlight{Store: store, Max: 5, OnStoreError: tc.policy,
			Observe: func(e httplimit.InFlightEvent) { got = append(got, e.Outcome) }}).Handler(ok)
		if w := serve(h, "192.0.2.1", "GET"); w.Code != tc.want {
			t.Errorf("%v: %d, want %d", tc.policy, w.Code, tc.want)
		}
		if len(got) != 1 || got[0] != httplimit.StoreError {
			t.Errorf("%v: observed %v, want [store_error]", tc.policy, got)
		}
	}
}

func TestInFlightOpaqueAndLegacyHeaders(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, mode := range []header.Mode{header.Legacy, header.Off} {
		h := (&httplimit.InFlight{Store: store, Max: 1, Headers: mode}).Handler(ok)
		if w := serve(h, "192.0.2.9", "GET"); w.Header().Get("RateLimit-Policy") != "" || w.Header().Get("RateLimit") != "" {
			t.Errorf("%v: in-flight headers %v, want none", mode, w.Header())
		}
	}
}
