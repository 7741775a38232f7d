package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rules"
)

// budgetRules limits each IP to 5 an hour under ALGORITHM.
const budgetRules = `
domain: budget
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: ALGORITHM, unit: hour, requests_per_unit: 5}
`

// budgetAlgorithms are the algorithms a refund gives back under (the
// leaky bucket's queue delays each request to its slot; it refunds as
// gcra does).
var budgetAlgorithms = []string{"gcra", "token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"}

// redisBudgetStore opens a store on srv under a prefix of its own, on a
// clock frozen at t0 (so that a refill never blurs the counts).
func redisBudgetStore(t *testing.T, srv *redistest.Server, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), srv.URL(), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second,
		Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// budgetStores returns the memory store and (unless -short) a store on a
// real redis-server, each on a clock frozen at t0.
func budgetStores(t *testing.T) map[string]func(t *testing.T, prefix string) ratelimit.Store {
	stores := map[string]func(t *testing.T, prefix string) ratelimit.Store{
		"memory": func(t *testing.T, _ string) ratelimit.Store { return newStore(t) },
	}
	if !testing.Short() {
		srv := redistest.Start(t)
		stores["redis"] = func(t *testing.T, prefix string) ratelimit.Store { return redisBudgetStore(t, srv, prefix) }
	}
	return stores
}

// erroring counts the requests that reach it and answers each 500.
type erroring struct{ calls atomic.Int64 }

func (f *erroring) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	w.WriteHeader(http.StatusInternalServerError)
}

// outcomes counts the Observe events of a middleware by outcome.
type outcomes struct {
	mu sync.Mutex
	n  map[httplimit.Outcome]int
}

func (o *outcomes) observe(e httplimit.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[httplimit.Outcome]int{}
	}
	o.n[e.Outcome]++
}

func (o *outcomes) get(out httplimit.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[out]
}

// TestRefundBudgetBoundsFailures floods a 5-an-hour limit with 40
// requests that all fail with 500, on RefundOn 500, on the memory store
// and on a real redis-server, under every algorithm and several budgets:
// the handler sees the limit plus the budget (ceil(budget × 5)) and no
// more, the budget's refunds are observed as Refunded and the five charges
// that stand as RefundRefused. A RefundBudget of 0 or below is the
// default (0.5: 3 refunds), above 1 is 1. Without a budget, all 40
// reached the handler.
func TestRefundBudgetBoundsFailures(t *testing.T) {
	t.Parallel()
	budgets := []struct {
		budget  float64
		refunds int
	}{{0, 3}, {-1, 3}, {0.5, 3}, {1, 5}, {2, 5}, {0.2, 1}}
	for name, open := range budgetStores(t) {
		for _, alg := range budgetAlgorithms {
			for _, b := range budgets {
				t.Run(fmt.Sprintf("%s/%s/%v", name, alg, b.budget), func(t *testing.T) {
					var up erroring
					var obs outcomes
					mw := &httplimit.Middleware{Store: open(t, fmt.Sprintf("budget:%s:%v:", alg, b.budget)),
						Rules: mustRules(t, strings.Replace(budgetRules, "ALGORITHM", alg, 1)), Domain: "budget",
						Descriptors: []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}},
						RefundOn:    httplimit.RefundStatuses(500), RefundBudget: b.budget, Observe: obs.observe}
					h := mw.Handler(&up)
					for range 40 {
						do(h, "192.0.2.9:1")
					}
					if got, want := up.calls.Load(), int64(5+b.refunds); got != want {
						t.Errorf("40 failing requests: %d reached the handler, want %d (the limit 5 plus %d refunds)", got, want, b.refunds)
					}
					if got, refused := obs.get(httplimit.Refunded), obs.get(httplimit.RefundRefused); got != b.refunds || refused != 5 {
						t.Errorf("observed %d refunded and %d refund_refused, want %d and 5", got, refused, b.refunds)
					}
				})
			}
		}
	}
}

// TestRefundBudgetAcrossInstances runs two middlewares (two gateway
// instances) over two stores on one real redis-server, alternating one
// caller's failing requests between them: the budget is counted in Redis,
// so together they let through the limit plus one budget, not one each.
func TestRefundBudgetAcrossInstances(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var up erroring
	var hs []http.Handler
	for range 2 {
		mw := &httplimit.Middleware{Store: redisBudgetStore(t, srv, "fleet:"),
			Rules: mustRules(t, strings.Replace(budgetRules, "ALGORITHM", "token_bucket", 1)), Domain: "budget",
			Descriptors: []action.Descriptor{{Actions: []action.Action{action.RemoteAddress{}}}},
			RefundOn:    httplimit.RefundStatuses(500)}
		hs = append(hs, mw.Handler(&up))
	}
	for i := range 40 {
		do(hs[i%2], "192.0.2.9:1")
	}
	if got := up.calls.Load(); got != 8 {
		t.Errorf("40 failing requests over two instances: %d reached the handler, want 8 (5 plus one budget of 3)", got)
	}
}

// TestRefundBudgetRequest checks the budget's store request: a fixed
// window of ceil(budget × rate) (at least 1) per the rule's period, under
// the rule's key with the refund prefix, costing what the charge cost.
func TestRefundBudgetRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate   int64
		budget float64
		want   int64
	}{{5, 0.5, 3}, {1, 0.5, 1}, {100, 1, 100}, {7, 0.2, 2}, {1000, 0.001, 1}, {3, 0.01, 1}} {
		req := ratelimit.Request{Key: "sl:gcra:60000ms:api_user_alice_", Limit: ratelimit.Limit{Rate: tc.rate, Period: time.Minute, Burst: 2 * tc.rate},
			Algorithm: ratelimit.GCRA, N: 2}
		got := httplimit.RefundBudgetRequest(req, tc.budget)
		want := ratelimit.Request{Key: rules.RefundKey(req.Key), Limit: ratelimit.Limit{Rate: tc.want, Period: time.Minute, Burst: tc.want},
			Algorithm: ratelimit.FixedWindow, N: 2}
		if got != want {
			t.Errorf("RefundBudgetRequest(%d a minute, %v) = %+v, want %+v", tc.rate, tc.budget, got, want)
		}
	}
	if k := rules.RefundKey("sl:gcra:60000ms:api_"); k != "sl:refund:sl:gcra:60000ms:api_" {
		t.Errorf("RefundKey = %q", k)
	}
}
