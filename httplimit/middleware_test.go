package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rules"
)

const testRules = `
domain: test
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: minute, requests_per_unit: 3}
  - key: user
    rate_limit: {name: per-user, algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 20}
  - key: generic_key
    value: global
    rate_limit: {name: global, algorithm: fixed_window, unit: minute, requests_per_unit: 4}
  - key: generic_key
    value: shadowed
    shadow_mode: true
    rate_limit: {name: shadowed, unit: minute, requests_per_unit: 1}
  - key: generic_key
    value: monthly
    descriptors:
      - key: user
        quota: {period: month, limit: 2}
  - key: generic_key
    value: open
    rate_limit: {unlimited: true}
`

func mustRules(t testing.TB, src string) *rules.Set {
	t.Helper()
	c, err := rules.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := rules.NewSet(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func newStore(t testing.TB) *memstore.Store {
	s := memstore.New(memstore.Options{Now: func() time.Time { return t0 }, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return s
}

// users resolves X-API-Key "bad" to 401, any other key to that user, and
// no key to the anonymous caller at RemoteAddr.
type users struct{}

func (users) Resolve(r *http.Request) (identity.Identity, error) {
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	trusted := netip.MustParsePrefix("10.0.0.0/8").Contains(ap.Addr()) // the test's trusted proxies
	switch k := r.Header.Get("X-API-Key"); k {
	case "":
		return identity.Identity{IP: ap.Addr(), TrustedPeer: trusted}, nil
	case "bad":
		return identity.Identity{}, fmt.Errorf("test: %w", identity.ErrUnauthorized)
	default:
		return identity.Identity{User: k, Tier: "free", Authenticated: true, IP: ap.Addr(), TrustedPeer: trusted}, nil
	}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

func do(h http.Handler, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/api/x", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func identityDescriptors(extra ...action.Action) []action.Descriptor {
	ds := []action.Descriptor{{Actions: []action.Action{action.IdentityKey{}}}}
	for _, a := range extra {
		ds = append(ds, action.Descriptor{Actions: []action.Action{a}})
	}
	return ds
}

func TestPerIPThen429IETF(t *testing.T) {
	t.Parallel()
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Identity: users{}}
	h := mw.Handler(ok)
	for i, want := range []string{`"per-ip";r=2;t=20`, `"per-ip";r=1;t=40`, `"per-ip";r=0;t=60`} {
		w := do(h, "192.0.2.1:1000")
		if w.Code != 200 || w.Header().Get("RateLimit") != want || w.Header().Get("RateLimit-Policy") != `"per-ip";q=3;w=60` {
			t.Fatalf("request %d: %d %q %q, want 200 %q", i, w.Code, w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Policy"), want)
		}
	}
	w := do(h, "192.0.2.1:1001")
	if w.Code != 429 || w.Header().Get("Retry-After") != "20" || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("4th request: %d Retry-After %q Content-Type %q, want 429 20 application/problem+json", w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"))
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != 429 || p.Policy != "per-ip" {
		t.Fatalf("429 body %s: %+v, %v; want status 429, policy per-ip", w.Body, p, err)
	}
	// Another IP has its own bucket.
	if w := do(h, "192.0.2.2:1000"); w.Code != 200 {
		t.Fatalf("other IP: %d, want 200", w.Code)
	}
	// One user from many addresses shares one bucket.
	for i := range 20 {
		if w := do(h, netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 1).String(), "X-API-Key", "alice"); w.Code != 200 {
			t.Fatalf("alice request %d: %d, want 200", i, w.Code)
		}
	}
	if w := do(h, "203.0.113.9:1", "X-API-Key", "alice"); w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("alice request 21: %d Retry-After %q, want 429 1", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestHeaderModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode       header.Mode
		allowed    map[string]string
		denied     map[string]string
		policyBody bool
	}{
		{header.IETF,
			map[string]string{"RateLimit-Policy": `"per-ip";q=3;w=60`, "RateLimit": `"per-ip";r=0;t=60`, "X-RateLimit-Limit": "", "Retry-After": ""},
			map[string]string{"RateLimit": `"per-ip";r=0;t=60`, "Retry-After": "20"}, true},
		{header.Legacy,
			map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "60", "RateLimit": ""},
			map[string]string{"X-RateLimit-Remaining": "0", "Retry-After": "20"}, true},
		{header.Off,
			map[string]string{"X-RateLimit-Limit": "", "RateLimit": "", "RateLimit-Policy": ""},
			map[string]string{"X-RateLimit-Limit": "", "RateLimit": "", "Retry-After": ""}, false},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
				Descriptors: identityDescriptors(), Headers: tc.mode, Now: func() time.Time { return t0 }}
			h := mw.Handler(ok)
			var w *httptest.ResponseRecorder
			for range 3 {
				w = do(h, "192.0.2.1:1")
			}
			for k, want := range tc.allowed {
				if got := w.Header().Get(k); w.Code != 200 || got != want {
					t.Errorf("3rd request: %d %s: %q, want 200 %q", w.Code, k, got, want)
				}
			}
			w = do(h, "192.0.2.1:1")
			for k, want := range tc.denied {
				if got := w.Header().Get(k); w.Code != 429 || got != want {
					t.Errorf("4th request: %d %s: %q, want 429 %q", w.Code, k, got, want)
				}
			}
			if got := strings.Contains(w.Body.String(), "per-ip"); got != tc.policyBody {
				t.Errorf("429 body %s names the policy: %v, want %v", w.Body, got, tc.policyBody)
			}
		})
	}
}

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) observe(e httplimit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e.Policy+":"+e.Outcome.String())
}

func TestShadowNeverDenies(t *testing.T) {
	t.Parallel()
	for _, global := range []bool{false, true} {
		rec := &recorder{}
		ds := []action.Descriptor{{Actions: []action.Action{action.GenericKey{DescriptorValue: "shadowed"}}}}
		if global {
			ds = identityDescriptors(action.GenericKey{DescriptorValue: "shadowed"})
		}
		mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
			Descriptors: ds, Shadow: global, Observe: rec.observe}
		h := mw.Handler(ok)
		for i := range 5 {
			w := do(h, "192.0.2.1:1")
			if w.Code != 200 || strings.Contains(w.Header().Get("RateLimit"), "shadowed") || (global && w.Header().Get("RateLimit") != "") {
				t.Fatalf("global shadow %v, request %d: %d RateLimit %q, want 200 without the shadow policy", global, i, w.Code, w.Header().Get("RateLimit"))
			}
		}
		n := strings.Count(strings.Join(rec.events, " "), "shadowed:shadow_denied")
		if n != 4 {
			t.Errorf("global shadow %v: %d shadow denials of the shadow rule, want 4 (events %v)", global, n, rec.events)
		}
		if n := strings.Count(strings.Join(rec.events, " "), "per-ip:shadow_denied"); global && n != 2 {
			t.Errorf("global shadow: %d shadow denials of per-ip, want 2 (events %v)", n, rec.events)
		}
	}
}

func TestDeniedByLaterRuleChargesNoEarlierRule(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	mw := &httplimit.Middleware{Store: store, Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(action.GenericKey{DescriptorValue: "global"}), Identity: users{}}
	h := mw.Handler(ok)
	// The global window admits 4: users a..d take them.
	for _, u := range []string{"a", "b", "c", "d"} {
		if w := do(h, "192.0.2.1:1", "X-API-Key", u); w.Code != 200 {
			t.Fatalf("user %s: %d, want 200", u, w.Code)
		}
	}
	for range 5 {
		w := do(h, "192.0.2.1:1", "X-API-Key", "e")
		if w.Code != 429 || !strings.Contains(w.Body.String(), `"global"`) {
			t.Fatalf("user e: %d %s, want 429 naming global", w.Code, w.Body)
		}
	}
	// e's own bucket was never charged.
	d, err := store.Apply(context.Background(), ratelimit.Request{Key: "sl:token_bucket:1000ms:test_user_e_", Algorithm: ratelimit.TokenBucket,
		Limit: ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 20}})
	if err != nil || d.Remaining != 20 {
		t.Errorf("user e's bucket: %+v, %v; want 20 remaining", d, err)
	}
}

func TestCostAndBadInput(t *testing.T) {
	t.Parallel()
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Identity: users{}, CostHeader: "X-Cost"}
	h := mw.Handler(ok)
	for _, tc := range []struct {
		hdr  []string
		code int
		rl   string
	}{
		{[]string{"X-Cost", "abc"}, 400, ""},
		{[]string{"X-Cost", "-1"}, 400, ""},
		{[]string{"X-Cost", "0"}, 400, ""},
		{[]string{"X-Cost", "99999999999999999999999"}, 400, ""},
		{[]string{"X-API-Key", "bad"}, 401, ""},
		{[]string{"X-API-Key", "u", "X-Cost", "15"}, 200, `"per-user";r=5;t=2`},
		{[]string{"X-API-Key", "u", "X-Cost", "6"}, 429, `"per-user";r=5;t=2`},
		{[]string{"X-API-Key", "u", "X-Cost", "21"}, 429, `"per-user";r=5;t=2`},
		{[]string{"X-API-Key", "u"}, 200, `"per-user";r=4;t=2`},
	} {
		// The cost header is believed from a trusted proxy only.
		w := do(h, "10.0.0.1:1", tc.hdr...)
		if w.Code != tc.code || w.Header().Get("RateLimit") != tc.rl {
			t.Errorf("%v: %d RateLimit %q, want %d %q", tc.hdr, w.Code, w.Header().Get("RateLimit"), tc.code, tc.rl)
		}
	}
}

// TestCostHeaderUntrusted: a client cannot lower (or break) its cost with
// the cost header; only a trusted proxy can set it.
func TestCostHeaderUntrusted(t *testing.T) {
	t.Parallel()
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Identity: users{}, CostHeader: "X-Cost", Cost: 10}
	h := mw.Handler(ok)
	// per-user holds 20: two requests at cost 10, whatever X-Cost says.
	for i, want := range []int{200, 200, 429, 429} {
		w := do(h, "192.0.2.1:1", "X-API-Key", "v", "X-Cost", "1")
		if w.Code != want {
			t.Fatalf("request %d with X-Cost: 1 from an untrusted peer: %d, want %d", i, w.Code, want)
		}
	}
	if w := do(h, "192.0.2.1:1", "X-API-Key", "w", "X-Cost", "abc"); w.Code != 200 {
		t.Errorf("a malformed X-Cost from an untrusted peer: %d, want 200 (ignored)", w.Code)
	}
}

func TestKillSwitchAndUnlimited(t *testing.T) {
	t.Parallel()
	set := mustRules(t, testRules)
	for _, mw := range []*httplimit.Middleware{
		{Disabled: true, Descriptors: identityDescriptors()},
		{DisabledRules: []string{"per-ip"}, Descriptors: identityDescriptors()},
		{Descriptors: []action.Descriptor{{Actions: []action.Action{action.GenericKey{DescriptorValue: "open"}}}}},
	} {
		mw.Store, mw.Rules, mw.Domain = newStore(t), set, "test"
		h := mw.Handler(ok)
		for i := range 10 {
			if w := do(h, "192.0.2.1:1"); w.Code != 200 || w.Header().Get("RateLimit") != "" {
				t.Fatalf("%+v request %d: %d RateLimit %q, want 200 and no header", mw, i, w.Code, w.Header().Get("RateLimit"))
			}
		}
	}
}

type failing struct{}

func (failing) Apply(context.Context, ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("test: store down")
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    ratelimit.FailurePolicy
		want int
	}{{ratelimit.FailError, 503}, {ratelimit.FailAllow, 200}, {ratelimit.FailDeny, 503}, {ratelimit.FailLocal, 200}} {
		rec := &recorder{}
		mw := &httplimit.Middleware{Store: failing{}, Rules: mustRules(t, testRules), Domain: "test",
			Descriptors: identityDescriptors(), OnStoreError: tc.p, Observe: rec.observe}
		w := do(mw.Handler(ok), "192.0.2.1:1")
		if w.Code != tc.want || len(rec.events) != 1 || rec.events[0] != "per-ip:store_error" {
			t.Errorf("on store error %v: %d, events %v; want %d and one store_error", tc.p, w.Code, rec.events, tc.want)
		}
	}
}

func TestQuotaPolicy(t *testing.T) {
	t.Parallel()
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test", Identity: users{},
		Descriptors: []action.Descriptor{{Actions: []action.Action{action.GenericKey{DescriptorValue: "monthly"}, action.IdentityKey{}}}},
		Now:         func() time.Time { return t0 }}
	h := mw.Handler(ok)
	// 2026-11-21 12:00 to 2026-12-01: 9.5 days; November has 30.
	wantPolicy := `"test.generic_key_monthly.user";q=2;w=2592000`
	for i, want := range []string{`"test.generic_key_monthly.user";r=1;t=820800`, `"test.generic_key_monthly.user";r=0;t=820800`} {
		w := do(h, "192.0.2.1:1", "X-API-Key", "q")
		if w.Code != 200 || w.Header().Get("RateLimit") != want || w.Header().Get("RateLimit-Policy") != wantPolicy {
			t.Fatalf("request %d: %d %q %q; want 200 %q %q", i, w.Code, w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Policy"), want, wantPolicy)
		}
	}
	w := do(h, "192.0.2.1:1", "X-API-Key", "q")
	if w.Code != 429 || w.Header().Get("Retry-After") != "820800" || !strings.Contains(w.Body.String(), "monthly quota") {
		t.Fatalf("3rd request: %d Retry-After %q %s; want 429 820800 and a monthly quota body", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}

func TestQuotaModeReportsNeverDenies(t *testing.T) {
	t.Parallel()
	set := mustRules(t, `
domain: test
descriptors:
  - key: remote_address
    quota_mode: true
    rate_limit: {name: qm, unit: hour, requests_per_unit: 1}
`)
	rec := &recorder{}
	mw := &httplimit.Middleware{Store: newStore(t), Rules: set, Domain: "test", Observe: rec.observe,
		Descriptors: []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}}}
	h := mw.Handler(ok)
	for i := range 3 {
		if w := do(h, "192.0.2.1:1"); w.Code != 200 || !strings.HasPrefix(w.Header().Get("RateLimit"), `"qm";r=0`) {
			t.Errorf("request %d: %d RateLimit %q, want 200 and the policy reported", i, w.Code, w.Header().Get("RateLimit"))
		}
	}
	if got := strings.Join(rec.events, " "); got != "qm:allowed qm:shadow_denied qm:shadow_denied" {
		t.Errorf("events %q", got)
	}
}

// A matched rule with replaces removes the rule it names, as in
// envoyproxy/ratelimit: premium users get the premium limit only.
func TestReplaces(t *testing.T) {
	t.Parallel()
	set := mustRules(t, `
domain: test
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: hour, requests_per_unit: 2}
    descriptors:
      - key: tier
        value: premium
        rate_limit:
          name: premium
          unit: hour
          requests_per_unit: 5
          replaces: [{name: per_user}]
`)
	mw := &httplimit.Middleware{Store: newStore(t), Rules: set, Domain: "test", Identity: tiered{},
		Descriptors: []action.Descriptor{
			{Actions: []action.Action{action.IdentityKey{}}},
			{Actions: []action.Action{action.IdentityKey{}, action.Tier{}}},
		}}
	h := mw.Handler(ok)
	for _, tc := range []struct {
		key   string
		codes string
		rl    string
	}{
		{"free", "[200 200 429]", `"per_user";r=0;t=3600`},
		{"premium", "[200 200 200]", `"premium";r=2;t=3600`},
	} {
		var got []int
		var w *httptest.ResponseRecorder
		for range 3 {
			w = do(h, "192.0.2.1:1", "X-API-Key", tc.key)
			got = append(got, w.Code)
		}
		if fmt.Sprint(got) != tc.codes || w.Header().Get("RateLimit") != tc.rl {
			t.Errorf("%s: %v RateLimit %q, want %s %q", tc.key, got, w.Header().Get("RateLimit"), tc.codes, tc.rl)
		}
	}
}

// tiered makes the API key the tier of user u.
type tiered struct{}

func (tiered) Resolve(r *http.Request) (identity.Identity, error) {
	return identity.Identity{User: "u-" + r.Header.Get("X-API-Key"), Tier: r.Header.Get("X-API-Key"), Authenticated: true}, nil
}

func TestDailyQuotaBody(t *testing.T) {
	t.Parallel()
	set := mustRules(t, `
domain: test
descriptors:
  - key: remote_address
    quota: {period: day, limit: 1}
`)
	mw := &httplimit.Middleware{Store: newStore(t), Rules: set, Domain: "test", Now: func() time.Time { return t0 },
		Descriptors: []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}}}
	h := mw.Handler(ok)
	do(h, "192.0.2.1:1")
	w := do(h, "192.0.2.1:1")
	// 12:00 UTC: 12 hours to the end of the day.
	if w.Code != 429 || !strings.Contains(w.Body.String(), "daily quota") || w.Header().Get("Retry-After") != "43200" ||
		w.Header().Get("RateLimit-Policy") != `"test.remote_address";q=1;w=86400` {
		t.Errorf("2nd request: %d %s Retry-After %q RateLimit-Policy %q", w.Code, w.Body, w.Header().Get("Retry-After"), w.Header().Get("RateLimit-Policy"))
	}
}

// TestResetJitter: fixed-window denials get Retry-After spread over up to
// ResetJitter of the window, never less than the window's end; without
// it every denied client is told the same instant.
func TestResetJitter(t *testing.T) {
	t.Parallel()
	for _, jitter := range []float64{0, 0.5} {
		mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test", Identity: users{}, ResetJitter: jitter,
			Descriptors: []action.Descriptor{{Actions: []action.Action{action.GenericKey{DescriptorValue: "global"}}}},
			Now:         func() time.Time { return t0 }}
		h := mw.Handler(ok)
		for range 4 { // global: 4 a minute
			do(h, "192.0.2.1:1")
		}
		seen := map[string]bool{}
		for range 40 {
			w := do(h, "192.0.2.1:1")
			if w.Code != 429 {
				t.Fatalf("jitter %v: %d, want 429", jitter, w.Code)
			}
			ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil || ra < 1 || ra > 60+30 {
				t.Fatalf("jitter %v: Retry-After %q", jitter, w.Header().Get("Retry-After"))
			}
			seen[w.Header().Get("Retry-After")] = true
		}
		switch {
		case jitter == 0 && len(seen) != 1:
			t.Errorf("no jitter: %d distinct Retry-After values, want 1", len(seen))
		case jitter > 0 && len(seen) < 5:
			t.Errorf("jitter %v: %d distinct Retry-After values in 40 denials, want spread", jitter, len(seen))
		}
	}
}
