package httplimit_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
)

// TestAdaptive runs the middleware in a real HTTP server: answers
// classify the release (a 503 from the handler lowers the limit like a
// timeout; a 404 is a normal sample), and a refusal is a 503 with
// Retry-After and a problem document.
func TestAdaptive(t *testing.T) {
	// A virtual clock that handlers move on: 10 ms per answer.
	var ns atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0.Add(time.Duration(ns.Load())) }
	l := adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: adaptive.LimiterOptions{Initial: 10, Now: now, Seed: 1,
		MinSamples: 1, Window: time.Millisecond, Probe: adaptive.ProbeOptions{Interval: -1}}})
	var status atomic.Int64
	status.Store(http.StatusOK)
	hold := make(chan struct{})
	held := make(chan struct{}, 64) // a /hold request took its slot
	h := (&httplimit.Adaptive{Limiter: l}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-hold
		}
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		ns.Add(int64(10 * time.Millisecond))
		w.WriteHeader(int(status.Load()))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for range 3 {
		get("/").Body.Close()
	}
	if got := l.MinRTT(); got != 10*time.Millisecond {
		t.Fatalf("baseline after three 10 ms answers = %v, want 10ms", got)
	}
	status.Store(http.StatusServiceUnavailable)
	for range 3 {
		get("/").Body.Close()
	}
	if got := l.Limit(); got >= 10 {
		t.Errorf("limit %d after three 503s from the handler: want it cut below 10", got)
	}
	// A panicking handler releases its slot.
	in := l.InFlight()
	if resp, err := http.Get(srv.URL + "/panic"); err == nil {
		resp.Body.Close()
	}
	if got := l.InFlight(); got != in {
		t.Errorf("in flight %d after a handler panic, was %d", got, in)
	}
	// Fill every slot, then one more is refused.
	status.Store(http.StatusOK)
	n := l.Limit()
	done := make(chan struct{})
	for range n {
		go func() {
			if resp, err := http.Get(srv.URL + "/hold"); err == nil {
				resp.Body.Close()
			}
			done <- struct{}{}
		}()
	}
	for i := range n {
		select {
		case <-held:
		case <-time.After(time.Minute): // a bound, not a timing assertion
			t.Fatalf("%d of %d /hold requests reached the handler in a minute", i, n)
		}
	}
	if got := l.InFlight(); got != n {
		t.Fatalf("in flight %d with %d requests held, want %d", got, n, n)
	}
	resp := get("/")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(hold)
	for range n {
		<-done
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("refusal: %s, Retry-After %q, Content-Type %q; want 503, 1, application/problem+json",
			resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	}
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Status != 503 || p.Title == "" {
		t.Errorf("problem body %q: %v", body, err)
	}
	if got := l.InFlight(); got != 0 {
		t.Errorf("in flight %d at the end, want 0", got)
	}
}
