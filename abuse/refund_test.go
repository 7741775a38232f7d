package abuse

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// refundGateway writes a gateway config in front of up: one route limited
// to 5 a minute per client IP (fixed_window, so that the refund budget's
// windows are the limit's), refund_on refundOn, a 100 ms upstream_timeout,
// on store (the memory store when ""), in a domain of its own (tests share
// a redis-server).
func refundGateway(t testing.TB, up, store, refundOn, domain string) string {
	storeLine := ""
	if store != "" {
		storeLine = "store: " + store + "?timeout=5s\n"
	}
	return writeFile(t, t.TempDir(), "gateway.yaml", fmt.Sprintf(`
upstream: %s
upstream_timeout: 100ms
%sroutes:
  - path: /
    refund_on: %s
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: %s
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: fixed_window, unit: minute, requests_per_unit: 5}
`, up, storeLine, refundOn, domain))
}

// failingUpstream counts the requests that reach it and answers each with
// status, or (status 0) never: it waits until the gateway gives up.
func failingUpstream(t testing.TB, status int) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if status == 0 {
			<-r.Context().Done() // past upstream_timeout: the gateway's own 504
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// Attack: refunds removed the limit from the requests that fail. With
// refund_on, a client that makes the upstream answer 500 (bad input) or
// runs a query past upstream_timeout (the gateway's own 504) was refunded
// every time: on a 5/min limit, 40 of 40 such requests reached the
// upstream (the shipped example refunds [502, 503, 504]).
//
// Bound: refunds per rule, caller and window are at most refund_budget ×
// the limit (default half, rounded up: 3 of 5), so a flood of 500s reaches
// the upstream at most 5 + 3 times a window; the gateway's own 504 is not
// refunded under refund_on [502, 503, 504] (only when refund_on names
// upstream_timeout, and then within the same budget), so that flood
// reaches it 5 times. The refused refunds are counted in
// sluice_gateway_decisions_total{outcome="refund_refused"}. On the memory
// store and on a real redis-server. A flood that spans a window boundary
// gets the allowance again per window it touches.
func TestRefundFloodsAreBounded(t *testing.T) {
	t.Parallel()
	stores := map[string]string{"memory": ""}
	if !testing.Short() {
		stores["redis"] = redistest.Start(t).URL()
	}
	for name, store := range stores {
		for _, tc := range []struct {
			name     string
			status   int // the upstream's; 0: it never answers
			refundOn string
			want     int64 // what reaches the upstream per window
			refunded bool  // whether the gateway refunds (up to its budget)
		}{
			{"upstream-500", 500, "[500]", 5 + 3, true},
			{"gateway-504", 0, "[502, 503, 504]", 5, false},
			{"gateway-504-named", 0, "[upstream_timeout]", 5 + 3, true},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				up, reached := failingUpstream(t, tc.status)
				g, err := tryServe(t, refundGateway(t, up.URL, store, tc.refundOn, tc.name))
				skipIfUnknown(t, err, "refund_on "+tc.refundOn)
				c := client(t)
				start := time.Now()
				for range 40 {
					do(t, c, "GET", g.url+"/")
				}
				windows := int64(time.Now().Unix()/60 - start.Unix()/60 + 1)
				if got := reached.Load(); got > tc.want*windows {
					t.Errorf("40 failing requests on 5 a minute: %d reached the upstream, want at most %d (%d window(s) of 5 plus refunds)", got, tc.want*windows, windows)
				}
				m := scrape(t, g.admin)
				refunded, _ := m.get("sluice_gateway_decisions_total", "rule", "per-ip", "outcome", "refunded")
				refused, _ := m.get("sluice_gateway_decisions_total", "rule", "per-ip", "outcome", "refund_refused")
				wantRefunded, wantRefused := 0.0, 0.0
				if tc.refunded {
					wantRefunded, wantRefused = 3, 5
				}
				if windows == 1 && (refunded != wantRefunded || refused != wantRefused) {
					t.Errorf("refunded %v and refund_refused %v, want %v and %v", refunded, refused, wantRefunded, wantRefused)
				}
			})
		}
	}
}
