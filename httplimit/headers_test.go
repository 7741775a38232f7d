package httplimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// The handler caches the RateLimit-Policy value: a request whose limit
// Adjust changes gets its own value, and the next request with the
// rule's own limit gets the rule's again.
func TestPolicyHeaderFollowsAdjust(t *testing.T) {
	t.Parallel()
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Identity: users{},
		Adjust: func(r *http.Request, c *rules.Check) {
			if r.Header.Get("X-Big") != "" {
				c.Request.Limit = ratelimit.Limit{Rate: 100, Period: 2 * time.Minute, Burst: 100}
			}
		}}
	h := mw.Handler(ok)
	for i, tc := range []struct{ big, policy string }{
		{"", `"per-ip";q=3;w=60`},
		{"1", `"per-ip";q=100;w=120`},
		{"1", `"per-ip";q=100;w=120`},
		{"", `"per-ip";q=3;w=60`},
	} {
		w := do(h, "192.0.2.7:1000", "X-Big", tc.big)
		if got := w.Header().Values("RateLimit-Policy"); len(got) != 1 || got[0] != tc.policy {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, tc.policy)
		}
		if got := w.Header().Values("RateLimit"); len(got) != 1 || !strings.HasPrefix(got[0], `"per-ip";r=`) {
			t.Errorf("request %d: RateLimit %q", i, got)
		}
	}
}

// A RateLimit value longer than the handler's inline buffer is written
// whole.
func TestLongRateLimitHeader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("p", 80)
	rs := strings.Replace(testRules, "name: per-ip,", "name: "+long+",", 1)
	mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, rs), Domain: "test",
		Descriptors: identityDescriptors(), Identity: users{}}
	h := mw.Handler(ok)
	w := do(h, "192.0.2.8:1000")
	if got, want := w.Header().Get("RateLimit"), `"`+long+`";r=2;t=20`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"`+long+`";q=3;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
}

// LatencySampling 16 times some decisions and not others; 0 times every
// one.
func TestLatencySampling(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16} {
		var timed, all int
		mw := &httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
			Descriptors: identityDescriptors(), Identity: users{}, LatencySampling: n,
			Observe: func(e httplimit.Event) {
				all++
				if e.Latency > 0 {
					timed++
				}
			}}
		h := mw.Handler(ok)
		for i := range 1600 {
			do(h, "192.0.2."+strconv.Itoa(i%200)+":1000")
		}
		switch {
		case all != 1600:
			t.Errorf("LatencySampling %d: %d events, want 1600", n, all)
		case n == 0 && timed != all:
			t.Errorf("LatencySampling 0: %d of %d timed, want all", timed, all)
		case n == 16 && (timed == 0 || timed == all):
			// (15/16)^1600 and (1/16)^1600: neither happens.
			t.Errorf("LatencySampling 16: %d of %d timed, want some, not all", timed, all)
		}
	}
}
