package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestRefundOnStatus runs the middleware in front of a real upstream
// (httptest.Server) that fails with 503 on /fail: the failed requests'
// charges come back (per-ip's remaining does not move), successful ones
// are charged, and every refund is observed. The shadow rule (1 a minute)
// has a refund budget of 1 (DefaultRefundBudget): its second charge
// stands.
func TestRefundOnStatus(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "upstream down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer up.Close()
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(up.URL + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
	store := newStore(t)
	var mu sync.Mutex
	refunded := map[string]int{}
	mw := &httplimit.Middleware{Store: store, Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(action.GenericKey{DescriptorValue: "shadowed"}),
		RefundOn:    httplimit.RefundStatuses(500, 502, 503, 504),
		Observe: func(e httplimit.Event) {
			if e.Outcome == httplimit.Refunded {
				mu.Lock()
				refunded[e.Policy]++
				mu.Unlock()
			}
		}}
	srv := httptest.NewServer(mw.Handler(proxy))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("RateLimit")
	}
	for i := range 2 {
		// Each is admitted with 2 remaining after its charge, and gives
		// the charge back: the next sees the same.
		if code, rl := get("/fail"); code != 503 || rl != `"per-ip";r=2;t=20` {
			t.Fatalf("failing request %d: %d %q, want 503 with its own charge shown (2 remaining)", i, code, rl)
		}
	}
	d, err := store.Apply(context.Background(), ratelimit.Request{Key: peekKey(t, mw), Limit: ratelimit.PerMinute(3), Algorithm: ratelimit.TokenBucket})
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 3 {
		t.Errorf("after 2 refunded failures: per-ip remaining %d, want 3", d.Remaining)
	}
	mu.Lock()
	if refunded["per-ip"] != 2 || refunded["shadowed"] != 1 {
		t.Errorf("refunds observed %v, want per-ip 2 and shadowed 1", refunded)
	}
	mu.Unlock()
	for i, want := range []int{200, 200, 200, 429} {
		if code, _ := get("/ok"); code != want {
			t.Fatalf("success %d after the failures: %d, want %d (3 a minute)", i, code, want)
		}
	}
	mu.Lock()
	if refunded["per-ip"] != 2 || refunded["shadowed"] != 1 {
		t.Errorf("after successes, refunds observed %v: successes must not refund", refunded)
	}
	mu.Unlock()
}

// peekKey returns the store key per-ip uses for 127.0.0.1.
func peekKey(t *testing.T, mw *httplimit.Middleware) string {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:1"
	var key string
	m := *mw
	m.Store = nil
	m.Observe = func(e httplimit.Event) {
		if e.Policy == "per-ip" {
			key = e.Key
		}
	}
	m.RefundOn = nil
	m.Store = newStore(t)
	m.Handler(ok).ServeHTTP(httptest.NewRecorder(), r)
	if key == "" {
		t.Fatal("no per-ip decision observed")
	}
	return key
}

// TestRefundOnNilNeverRefunds checks the default: a failing response keeps
// its charge.
func TestRefundOnNilNeverRefunds(t *testing.T) {
	t.Parallel()
	fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test", Descriptors: identityDescriptors()}
	h := mw.Handler(fail)
	for i, want := range []int{500, 500, 500, 429} {
		if w := do(h, "192.0.2.1:1"); w.Code != want {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want)
		}
	}
}

// TestRefundStatusWriter checks which status a refund sees: a handler that
// writes nothing answers 200, a body without WriteHeader is 200, 1xx
// informational answers are not final, and the writer still flushes.
func TestRefundStatusWriter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want int
	}{
		{"nothing", func(w http.ResponseWriter, r *http.Request) {}, 200},
		{"body", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("x")) }, 200},
		{"early hints then 502", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusBadGateway)
		}, 502},
		{"flush then 504 ignored", func(w http.ResponseWriter, r *http.Request) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("flush: %v", err)
			}
			w.WriteHeader(http.StatusGatewayTimeout)
		}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got int
			mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test", Descriptors: identityDescriptors(),
				RefundOn: func(_ *http.Request, status int) bool { got = status; return false }}
			do(mw.Handler(tc.h), "192.0.2.1:1")
			if got != tc.want {
				t.Errorf("RefundOn saw %d, want %d", got, tc.want)
			}
		})
	}
}
