package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// refundConfig limits per user (5 an hour) in front of UPSTREAM, and gives
// back the charge of a request the upstream answers 5xx.
const refundConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: UPSTREAM
identity:
  api_keys_file: keys.txt
routes:
  - path: /
    refund_on: [500, 502, 503, 504]
    rate_limits:
      - actions:
          - identity: {}
rules:
  domain: t
  descriptors:
    - key: user
      rate_limit: {name: per-user, algorithm: ALGORITHM, unit: hour, requests_per_unit: 5}
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 5}
`

// perUser and perIP find a rule's remaining in a RateLimit header.
var (
	perUser = regexp.MustCompile(`"per-user";r=\d+`)
	perIP   = regexp.MustCompile(`"per-ip";r=\d+`)
)

// failingUpstream answers 503 on /fail and 200 elsewhere.
func failingUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	return up
}

// TestRefundOnUpstream5xx runs the gateway against a real upstream that
// fails with 503, on the memory store and on real Redis servers
// (standalone and a 3-master cluster), for a bucket and each window
// algorithm: the failures' charges come back up to the route's refund
// budget (the default, half the limit: 3 of 5 an hour), so alice's
// remaining stays at 3 for three failures, then the charges stand and she
// is denied. The refunds are counted in
// sluice_gateway_decisions_total{outcome="refunded"}, the charges that
// stood in {outcome="refund_refused"}.
func TestRefundOnUpstream5xx(t *testing.T) {
	t.Parallel()
	stores := map[string]string{"memory": ""}
	if !testing.Short() {
		stores["redis"] = redistest.Shared(t).URL()
		stores["redis-cluster"] = redistest.SharedCluster(t).URL()
	}
	up := failingUpstream(t)
	for name, store := range stores {
		for _, alg := range []string{"token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"} {
			t.Run(name+"/"+alg, func(t *testing.T) {
				t.Parallel()
				cfg := strings.NewReplacer("UPSTREAM", up.URL, "ALGORITHM", alg).Replace(refundConfig)
				if store != "" {
					// A generous bound on each Redis call: under a loaded
					// CI machine, the default 100 ms could fail a call and
					// let the failure policy answer without headers.
					sep := "?"
					if strings.Contains(store, "?") {
						sep = "&"
					}
					cfg += "store: " + store + sep + "timeout=5s\n"
					// Each subtest its own keys on the shared servers.
					cfg = strings.Replace(cfg, "domain: t", "domain: t-"+alg, 1)
				}
				s := start(t, "", cfg)
				c := clientFrom(t, "127.0.0.2")
				alice := []string{"X-API-Key", "key-alice"}
				first := get(t, c, s.url+"/ok", alice...)
				if first.code != 200 || !strings.Contains(first.h.Get("RateLimit"), `"per-user";r=4`) {
					t.Fatalf("first request: %d RateLimit %q, want 200 with 4 remaining", first.code, first.h.Get("RateLimit"))
				}
				// The default budget gives back 3 (half of 5, rounded up)
				// an hour: those three show their own charge (3 left) and
				// leave it; then the charges stand, down to 429.
				var codes []string
				for range 10 {
					r := get(t, c, s.url+"/fail", alice...)
					codes = append(codes, fmt.Sprintf("%d:%s", r.code, perUser.FindString(r.h.Get("RateLimit"))))
				}
				want := `[503:"per-user";r=3 503:"per-user";r=3 503:"per-user";r=3 503:"per-user";r=3 503:"per-user";r=2 503:"per-user";r=1 503:"per-user";r=0 429:"per-user";r=0 429:"per-user";r=0 429:"per-user";r=0]`
				if got := fmt.Sprint(codes); got != want {
					t.Errorf("ten failures: %s, want %s", got, want)
				}
				if r := get(t, c, s.url+"/ok", alice...); r.code != 429 {
					t.Errorf("a success after the budget was spent: %d, want 429", r.code)
				}
				if m := metric(t, s, `sluice_gateway_decisions_total{outcome="refunded",rule="per-user"}`); m != "3" {
					t.Errorf("refunded decisions of per-user: %q, want 3", m)
				}
				if m := metric(t, s, `sluice_gateway_decisions_total{outcome="refund_refused",rule="per-user"}`); m != "4" {
					t.Errorf("refused refunds of per-user: %q, want 4", m)
				}
			})
		}
	}
}

// TestReloadKeepsUsedRequests is a reload mid-window: alice uses 3 of
// 5/min, the rule is raised to 50/min by a reload, and what she used
// stays used: the next request shows 46 remaining (47 before its own
// charge), not the 20 that reading the old bucket's state at the new rate
// gave. Lowering back keeps them used too: 4 used of 5 leave 1. On the
// memory store and on Redis.
func TestReloadKeepsUsedRequests(t *testing.T) {
	t.Parallel()
	stores := map[string]string{"memory": ""}
	if !testing.Short() {
		stores["redis"] = redistest.Shared(t).URL()
	}
	for name, store := range stores {
		// leaky_bucket delays each request to its slot (12 s apart at
		// 5/min); it converts as gcra does (ratelimittest's LimitChange).
		for _, alg := range []string{"gcra", "token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"} {
			t.Run(name+"/"+alg, func(t *testing.T) {
				t.Parallel()
				cfg := strings.NewReplacer("UPSTREAM", "builtin:echo", "ALGORITHM", alg, "unit: hour, requests_per_unit: 5}", "unit: minute, requests_per_unit: 5}").Replace(refundConfig)
				if store != "" {
					// A generous bound on each Redis call: under a loaded
					// CI machine, the default 100 ms could fail a call and
					// let the failure policy answer without headers.
					sep := "?"
					if strings.Contains(store, "?") {
						sep = "&"
					}
					cfg += "store: " + store + sep + "timeout=5s\n"
					cfg = strings.Replace(cfg, "domain: t", "domain: reload-"+alg, 1)
				}
				s := start(t, "", cfg)
				c := clientFrom(t, "127.0.0.3")
				alice := []string{"X-API-Key", "key-alice"}
				for i := range 3 {
					if r := get(t, c, s.url+"/", alice...); r.code != 200 {
						t.Fatalf("request %d: %d", i, r.code)
					}
				}
				raised := strings.Replace(cfg, "unit: minute, requests_per_unit: 5}", "unit: minute, requests_per_unit: 50}", 1)
				must(t, os.WriteFile(s.file, []byte(raised), 0o644))
				must(t, s.g.ReloadFile(s.file))
				r := get(t, c, s.url+"/", alice...)
				if r.code != 200 || !strings.Contains(r.h.Get("RateLimit"), `"per-user";r=46;`) || !strings.Contains(r.h.Get("RateLimit-Policy"), `"per-user";q=50;`) {
					t.Errorf("after raising 5/min to 50/min with 3 used: %d RateLimit %q Policy %q, want r=46 (47 before this request) of q=50",
						r.code, r.h.Get("RateLimit"), r.h.Get("RateLimit-Policy"))
				}
				must(t, os.WriteFile(s.file, []byte(cfg), 0o644))
				must(t, s.g.ReloadFile(s.file))
				r = get(t, c, s.url+"/", alice...)
				if r.code != 200 || !strings.Contains(r.h.Get("RateLimit"), `"per-user";r=0;`) {
					t.Errorf("lowered back to 5/min with 4 used: %d RateLimit %q, want the fifth admitted, r=0", r.code, r.h.Get("RateLimit"))
				}
				if r := get(t, c, s.url+"/", alice...); r.code != 429 {
					t.Errorf("a sixth request at 5/min: %d, want 429", r.code)
				}
			})
		}
	}
}

// TestRefundOnConfig checks refund_on's forms (codes, ranges, classes) and
// that every bad item is reported at its line.
func TestRefundOnConfig(t *testing.T) {
	t.Parallel()
	base := "upstream: builtin:echo\nroutes:\n  - path: /\n    refund_on: %s\n"
	c, err := gateway.Parse("gw.yaml", []byte(fmt.Sprintf(base, `[503, "500-502", 4xx]`)))
	if err != nil {
		t.Fatal(err)
	}
	set := c.Routes[0].RefundOn
	for status, want := range map[int]bool{503: true, 500: true, 501: true, 502: true, 504: false, 400: true, 499: true, 200: false, 599: false} {
		if set.Contains(status) != want {
			t.Errorf("refund_on [503, 500-502, 4xx] contains %d = %v, want %v", status, !want, want)
		}
	}
	for _, tc := range []struct{ value, want string }{
		{"[99]", "gw.yaml:4: routes[0].refund_on[0]: want a status code"},
		{"[100]", "gw.yaml:4: routes[0].refund_on[0]: status 100 is not a final response status"},
		{"[600]", "gw.yaml:4: routes[0].refund_on[0]: status 600 is not a final response status"},
		{`["504-500"]`, `gw.yaml:4: routes[0].refund_on[0]: range "504-500" ends before it starts`},
		{"[5xx, 6xx]", "gw.yaml:4: routes[0].refund_on[1]: want a status code"},
		{"[{a: 1}]", "gw.yaml:4: routes[0].refund_on[0]: want a status code (503), a range (500-599), a class (5xx), upstream_timeout or upstream_unreachable, got a mapping"},
		{"503", "gw.yaml:4: routes[0].refund_on: "},
		{"\n      - 500\n      - teapot", "gw.yaml:6: routes[0].refund_on[1]: want a status code"},
	} {
		_, err := gateway.Parse("gw.yaml", []byte(fmt.Sprintf(base, tc.value)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refund_on: %s: %v, want %q", tc.value, err, tc.want)
		}
	}
}

// TestRefundOnGatewayFailuresConfig checks refund_on's names for the
// gateway's own failures and refund_budget: a value above 0 and at most 1,
// every bad one reported at its line, and a budget without refund_on
// warned about.
func TestRefundOnGatewayFailuresConfig(t *testing.T) {
	t.Parallel()
	base := "upstream: builtin:echo\nroutes:\n  - path: /\n    refund_on: %s\n    refund_budget: %s\n"
	c, err := gateway.Parse("gw.yaml", []byte(fmt.Sprintf(base, "[502, upstream_timeout]", "0.25")))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Routes[0]
	if !r.RefundOn.Contains(502) || r.RefundOn.Contains(504) || r.RefundOnGateway != gateway.UpstreamTimeout || r.RefundBudget != 0.25 {
		t.Errorf("refund_on [502, upstream_timeout], refund_budget 0.25: %+v %v %v", r.RefundOn, r.RefundOnGateway, r.RefundBudget)
	}
	c, err = gateway.Parse("gw.yaml", []byte(fmt.Sprintf(base, "[upstream_unreachable, upstream_timeout]", "1")))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Routes[0]; len(r.RefundOn) != 0 || r.RefundOnGateway != gateway.UpstreamTimeout|gateway.UpstreamUnreachable || r.RefundBudget != 1 {
		t.Errorf("refund_on [upstream_unreachable, upstream_timeout]: %+v %v %v", r.RefundOn, r.RefundOnGateway, r.RefundBudget)
	}
	for _, budget := range []string{"0", "-0.5", "1.5", `"0.5"`, "half", "[1]", ".nan"} {
		_, err := gateway.Parse("gw.yaml", []byte(fmt.Sprintf(base, "[500]", budget)))
		if want := "gw.yaml:5: routes[0].refund_budget: want a fraction of the limit above 0 and at most 1"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refund_budget: %s: %v, want %q", budget, err, want)
		}
	}
	_, err = gateway.Parse("gw.yaml", []byte(fmt.Sprintf(base, "[upstream_timeouts]", "0.5")))
	if want := `gw.yaml:4: routes[0].refund_on[0]: want a status code (503), a range (500-599), a class (5xx), upstream_timeout or upstream_unreachable, got "upstream_timeouts"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("refund_on [upstream_timeouts]: %v, want %q", err, want)
	}
	c, err = gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\nroutes:\n  - path: /\n    refund_budget: 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "gw.yaml:4: routes[0].refund_budget: warning: refund_budget without refund_on"; len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], want) {
		t.Errorf("refund_budget alone: warnings %q, want %q", c.Warnings, want)
	}
}

// FuzzParseStatusRange checks that no input crashes the parser and that
// every range it accepts is a well-formed range of final statuses.
func FuzzParseStatusRange(f *testing.F) {
	for _, s := range []string{"503", "500-599", "5xx", "5XX", " 502 ", "1xx", "99", "600", "504-500", "-", "500-", "-500", "5x", "", "٥٠٠", "+500", "0500"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := gateway.ParseStatusRange(s)
		if err != nil {
			return
		}
		if r.Lo < 200 || r.Hi > 599 || r.Lo > r.Hi {
			t.Errorf("ParseStatusRange(%q) = %+v, want a range within 200..599", s, r)
		}
	})
}

// ownFailureConfig limits each IP to 5 an hour on two routes in front of
// UPSTREAM (100 ms upstream_timeout): /upstream/ refunds 502 and 504,
// /own/ the gateway's own timeout and unreachable upstream.
const ownFailureConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: UPSTREAM
upstream_timeout: 1s
routes:
  - path: /upstream/
    refund_on: [502, 504]
    rate_limits: [{actions: [{remote_address: {}}]}]
  - path: /own/
    refund_on: [upstream_timeout, upstream_unreachable]
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: own
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 5}
`

// TestRefundOnGatewayOwnFailures tells the upstream's own 502 and 504
// from the gateway's: an upstream that answers 504 itself, one that does
// not answer within upstream_timeout (the gateway's 504) and one that drops
// the connection (the gateway's 502). refund_on [502, 504] refunds the
// upstream's answers only; upstream_timeout and upstream_unreachable the
// gateway's only. A refunded request leaves the next one the same
// remaining; a charged one lowers it.
//
// upstream_timeout is 1 s, not less: an upstream's own quick answer must
// not be overtaken by the gateway's timeout on a loaded machine.
func TestRefundOnGatewayOwnFailures(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path.Base(r.URL.Path) {
		case "own504":
			http.Error(w, "the upstream's own timeout", http.StatusGatewayTimeout)
		case "slow":
			<-r.Context().Done() // the gateway gives up first
		case "drop":
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
		}
	}))
	t.Cleanup(up.Close)
	s := start(t, "", strings.Replace(ownFailureConfig, "UPSTREAM", up.URL, 1))
	for i, tc := range []struct {
		path     string
		status   int
		refunded bool
	}{
		{"/upstream/own504", 504, true},
		{"/upstream/slow", 504, false},
		{"/upstream/drop", 502, false},
		{"/own/own504", 504, false},
		{"/own/slow", 504, true},
		{"/own/drop", 502, true},
	} {
		c := clientFrom(t, fmt.Sprintf("127.0.0.%d", 20+i))
		var got []string
		for range 2 {
			r := get(t, c, s.url+tc.path)
			got = append(got, fmt.Sprintf("%d %s", r.code, perIP.FindString(r.h.Get("RateLimit"))))
		}
		want := []string{fmt.Sprintf(`%d "per-ip";r=4`, tc.status), fmt.Sprintf(`%d "per-ip";r=3`, tc.status)}
		if tc.refunded {
			want[1] = want[0]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s twice: %q, want %q (refunded: %v)", tc.path, got, want, tc.refunded)
		}
	}
}
