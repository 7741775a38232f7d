package httplimit_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/shed"
)

// refusals is a Refusals whose observer keeps what it saw.
type refusals struct {
	mu  sync.Mutex
	got []httplimit.Refusal
	rs  *httplimit.Refusals
}

func newRefusals() *refusals {
	r := &refusals{}
	r.rs = &httplimit.Refusals{Observe: func(rf httplimit.Refusal) {
		r.mu.Lock()
		r.got = append(r.got, rf)
		r.mu.Unlock()
	}}
	return r
}

func (r *refusals) take() []httplimit.Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// refusalShape checks what every refusal carries, whichever layer wrote
// it: status, Retry-After of at least a second, and a problem+json body
// with the status, a title, a detail and the policy; and returns the
// header names other than the RateLimit ones.
func refusalShape(t *testing.T, w *httptest.ResponseRecorder, status int, policy string) []string {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d (%s)", w.Code, status, w.Body)
	}
	if secs, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("Retry-After %q, want at least 1 s", w.Header().Get("Retry-After"))
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != status || p.Title == "" || p.Detail == "" || p.Policy != policy {
		t.Errorf("body %s (%v): want status %d, a title, a detail and policy %q", w.Body, err, status, policy)
	}
	var names []string
	for k := range maps.Keys(w.Header()) {
		if !strings.HasPrefix(k, "Ratelimit") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// TestEveryLayerRefusesThroughOneWriter: the rate limit, the in-flight
// cap, both shedders and the adaptive limit each refuse one request; each
// answer has the same headers and body shape, and one Refusals observer
// sees all five with their layer, policy and key.
func TestEveryLayerRefusesThroughOneWriter(t *testing.T) {
	rec := newRefusals()
	ctx := context.Background()
	ifStore := inflight.NewMemory(inflight.MemoryOptions{})
	defer ifStore.Close()
	cs := classes(t)
	fleet, err := shed.NewFleet(shed.FleetOptions{Store: ifStore, Key: "fleet", Cap: 1, Classes: cs})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1e9, 0)
	util, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: 1, Ramp: time.Second, Classes: cs,
		Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	lim := adaptive.NewVegas(adaptive.VegasOptions{LimiterOptions: adaptive.LimiterOptions{Initial: 1, Max: 1}})
	prio := httplimit.Priority{Classes: cs, Default: 1}

	rate := (&httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Refusals: rec.rs}).Handler(ok)
	for range 3 {
		do(rate, "192.0.2.1:1")
	}
	// The others are full before the request: a lease held, a token out.
	if _, d, err := ifStore.Acquire(ctx, inflight.Request{Key: "inflight:ip:192.0.2.1", Cap: 1, Weight: 1}); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if _, d, err := fleet.Acquire(ctx, 3); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	// Two requests of the one worker's capacity, a second apart: the
	// second update measures utilization 1 and sheds everything.
	for range 2 {
		if !util.Acquire(3) {
			t.Fatal("utilization: a critical request refused")
		}
		defer util.Release()
		clock = clock.Add(time.Second)
	}
	if _, ok := lim.Acquire(); !ok {
		t.Fatal("adaptive: the only slot refused")
	}
	for _, tc := range []struct {
		name   string
		h      http.Handler
		status int
		want   httplimit.Refusal // Layer, Policy, Key
	}{
		{"rate limit", rate, 429, httplimit.Refusal{Layer: httplimit.LayerRateLimit, Policy: "per-ip", Key: "sl:token_bucket:60000ms:test_remote%5Faddress_192.0.2.1_"}},
		{"in flight", (&httplimit.InFlight{Store: ifStore, Max: 1, Refusals: rec.rs}).Handler(ok), 429,
			httplimit.Refusal{Layer: httplimit.LayerInFlight, Policy: "in-flight", Key: "inflight:ip:192.0.2.1"}},
		{"fleet", (&httplimit.Shedder{Fleet: fleet, Priority: prio, Refusals: rec.rs}).Handler(ok), 503,
			httplimit.Refusal{Layer: httplimit.LayerShed, Policy: "shed", Key: "fleet:get"}},
		{"utilization", (&httplimit.Shedder{Utilization: util, Priority: prio, Refusals: rec.rs}).Handler(ok), 503,
			httplimit.Refusal{Layer: httplimit.LayerShed, Policy: "shed", Key: "utilization:get"}},
		{"adaptive", (&httplimit.Adaptive{Limiter: lim, Name: "routes[0]", Refusals: rec.rs}).Handler(ok), 503,
			httplimit.Refusal{Layer: httplimit.LayerAdaptive, Policy: "adaptive", Key: "routes[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(tc.h, "192.0.2.1:1")
			names := refusalShape(t, w, tc.status, tc.want.Policy)
			if want := []string{"Content-Length", "Content-Type", "Retry-After", "X-Content-Type-Options"}; !slices.Equal(names, want) {
				t.Errorf("headers %v, want %v (and the RateLimit ones)", names, want)
			}
			got := rec.take()
			if len(got) != 1 {
				t.Fatalf("observed %d refusals, want 1: %+v", len(got), got)
			}
			g := got[0]
			if g.Layer != tc.want.Layer || g.Policy != tc.want.Policy || g.Key != tc.want.Key || g.Status != tc.status || g.Cause != httplimit.OverLimit {
				t.Errorf("observed %+v, want layer %v policy %q key %q status %d over_limit", g, tc.want.Layer, tc.want.Policy, tc.want.Key, tc.status)
			}
		})
	}
}

// TestDenyPolicyAnswer: a store that cannot decide under on_store_error
// deny answers 503 "limiter unavailable" with the Retry-After of
// Refusals.UnavailableRetryAfter (default 1 s), in every layer with a
// store; the rate limit's headers do not say the quota is full again at
// once (no r=0;t=0). The error policy answers 503 too, without a promise.
func TestDenyPolicyAnswer(t *testing.T) {
	closed := inflight.NewMemory(inflight.MemoryOptions{})
	closed.Close() // every call fails
	cs := classes(t)
	fleet, err := shed.NewFleet(shed.FleetOptions{Store: closed, Cap: 10, Classes: cs})
	if err != nil {
		t.Fatal(err)
	}
	for _, retry := range []time.Duration{0, 3 * time.Second} {
		want := max(1, int(retry/time.Second))
		rec := newRefusals()
		rec.rs.UnavailableRetryAfter = retry
		layers := []struct {
			name, policy string
			h            func(p ratelimit.FailurePolicy, mode header.Mode) http.Handler
		}{
			{"rate limit", "per-ip", func(p ratelimit.FailurePolicy, mode header.Mode) http.Handler {
				return (&httplimit.Middleware{Store: failing{}, Rules: mustRules(t, testRules), Domain: "test", Headers: mode,
					Descriptors: identityDescriptors(), OnStoreError: p, Refusals: rec.rs}).Handler(ok)
			}},
			{"in flight", "in-flight", func(p ratelimit.FailurePolicy, mode header.Mode) http.Handler {
				return (&httplimit.InFlight{Store: closed, Max: 5, OnStoreError: p, Headers: mode, Refusals: rec.rs}).Handler(ok)
			}},
			{"fleet", "shed", func(p ratelimit.FailurePolicy, _ header.Mode) http.Handler {
				return (&httplimit.Shedder{Fleet: fleet, Priority: httplimit.Priority{Classes: cs}, OnStoreError: p, Refusals: rec.rs}).Handler(ok)
			}},
		}
		for _, l := range layers {
			w := do(l.h(ratelimit.FailDeny, header.IETF), "192.0.2.1:1")
			refusalShape(t, w, 503, l.policy)
			if got := w.Header().Get("Retry-After"); got != strconv.Itoa(want) {
				t.Errorf("%s, retry %v: Retry-After %q, want %d", l.name, retry, got, want)
			}
			if !strings.Contains(w.Body.String(), "limiter unavailable") {
				t.Errorf("%s: body %s does not name the cause", l.name, w.Body)
			}
			if rl := w.Header().Get("RateLimit"); l.name == "rate limit" && rl != `"per-ip";r=0;t=`+strconv.Itoa(want) {
				t.Errorf("%s: RateLimit %q, want r=0 and t=%d (not full again before Retry-After)", l.name, rl, want)
			}
			got := rec.take()
			if len(got) != 1 || got[0].Cause != httplimit.Unavailable || got[0].Err == nil || got[0].RetryAfter != time.Duration(want)*time.Second {
				t.Errorf("%s: observed %+v, want one unavailable refusal with its error and the Retry-After", l.name, got)
			}
			// on_store_error: error reports the failure: 503, no promise.
			w = do(l.h(ratelimit.FailError, header.IETF), "192.0.2.1:1")
			if w.Code != 503 || w.Header().Get("Retry-After") != "" || w.Header().Get("RateLimit") != "" {
				t.Errorf("%s, error policy: %d %v, want 503 without Retry-After or RateLimit", l.name, w.Code, w.Header())
			}
			if got := rec.take(); len(got) != 1 || got[0].Cause != httplimit.Unavailable {
				t.Errorf("%s, error policy: observed %+v, want one unavailable refusal", l.name, got)
			}
		}
		// Legacy: the reset is not 0 either.
		w := do(layers[0].h(ratelimit.FailDeny, header.Legacy), "192.0.2.1:1")
		if w.Code != 503 || w.Header().Get("X-RateLimit-Reset") != strconv.Itoa(want) || w.Header().Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("legacy: %d %v, want 503 with X-RateLimit-Reset %d", w.Code, w.Header(), want)
		}
		rec.take()
	}
}

// In the Opaque mode a 429 is bare (no Retry-After, no detail, no
// policy), through every layer that has a header mode, and still observed.
func TestOpaqueRefusalsAreBare(t *testing.T) {
	rec := newRefusals()
	ifStore := inflight.NewMemory(inflight.MemoryOptions{})
	defer ifStore.Close()
	if _, _, err := ifStore.Acquire(context.Background(), inflight.Request{Key: "inflight:ip:192.0.2.1", Cap: 1, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	rate := (&httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Headers: header.Off, Refusals: rec.rs}).Handler(ok)
	for range 3 {
		do(rate, "192.0.2.1:1")
	}
	inf := (&httplimit.InFlight{Store: ifStore, Max: 1, Headers: header.Off, Refusals: rec.rs}).Handler(ok)
	for _, h := range []http.Handler{rate, inf} {
		w := do(h, "192.0.2.1:1")
		if w.Code != 429 || w.Header().Get("Retry-After") != "" || strings.Contains(w.Body.String(), "detail") || strings.Contains(w.Body.String(), "policy") {
			t.Errorf("opaque: %d %v %s, want a bare 429", w.Code, w.Header(), w.Body)
		}
	}
	if got := rec.take(); len(got) != 2 {
		t.Errorf("observed %d refusals, want 2", len(got))
	}
}
