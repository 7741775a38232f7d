package httplimit

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// Refunded is the Outcome of a rule whose charge was given back after the
// response (Middleware.RefundOn); RefundRefused that of a rule whose charge
// stands because the caller's refund budget for the window is spent
// (Middleware.RefundBudget).
const (
	Refunded      Outcome = 4
	RefundRefused Outcome = 5
)

// DefaultRefundBudget is Middleware.RefundBudget's default: half the
// limit. A caller who can make its requests fail at will (bad input
// answered 500, a query that outlasts the upstream's timeout) reaches the
// upstream at most one and a half times its limit per window, and an
// honest one still gets back the charge of one admitted request in three
// when the upstream fails under it.
const DefaultRefundBudget = 0.5

// RefundStatuses returns a RefundOn function that matches the given
// statuses (for example 500, 502, 503, 504).
func RefundStatuses(statuses ...int) func(r *http.Request, status int) bool {
	set := make(map[int]bool, len(statuses))
	for _, s := range statuses {
		set[s] = true
	}
	return func(_ *http.Request, status int) bool { return set[status] }
}

// RefundBudgetRequest returns the store request that spends req.N of the
// refund budget of req (an admitted charge) under budget (a
// Middleware.RefundBudget in (0, 1]): a FixedWindow of
// ceil(budget × req.Limit.Rate) events per req.Limit.Period under
// rules.RefundKey(req.Key). Its windows are those of a fixed_window rule
// of the same period (a calendar quota's one window covers its period), so
// a window's refunds are counted in one window of the budget.
func RefundBudgetRequest(req ratelimit.Request, budget float64) ratelimit.Request {
	n := max(int64(math.Ceil(budget*float64(req.Limit.Rate))), 1)
	return ratelimit.Request{
		Key:       rules.RefundKey(req.Key),
		Limit:     ratelimit.Limit{Rate: n, Period: req.Limit.Period, Burst: n},
		Algorithm: ratelimit.FixedWindow,
		N:         req.N,
	}
}

// serveNext runs the next handler for an admitted request whose charges
// are as, and gives them back when the response's status satisfies
// RefundOn: the work the caller paid for did not happen (the design article's
// counter leak; express-rate-limit's skipFailedRequests). A handler that
// writes nothing answers 200; a panicking one refunds nothing.
func (h *handler) serveNext(w http.ResponseWriter, r *http.Request, as []applied) {
	if h.m.RefundOn == nil {
		h.next.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	h.next.ServeHTTP(sw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	if h.m.RefundOn(r, status) {
		// The caller may be gone; what it was charged is still owed back.
		h.refund(context.WithoutCancel(r.Context()), as)
	}
}

// refund gives back, rule by rule, what each admitted check was charged,
// once the rule's refund budget has room for it (RefundBudgetRequest; a
// budget the store cannot decide refunds nothing). A check that was not
// charged (a shadow denial, a skipped store failure) has nothing to give
// back.
func (h *handler) refund(ctx context.Context, as []applied) {
	for i := range as {
		a := &as[i]
		if !a.d.Allowed || a.failed || a.Request.N <= 0 {
			continue
		}
		req := a.Request
		t0 := time.Now()
		ev := Event{Rule: a.Rule, Policy: a.policy, Outcome: Refunded, Key: req.Key, Ctx: ctx}
		d, err := h.m.Store.Apply(ctx, RefundBudgetRequest(req, h.m.RefundBudget))
		if err == nil && !d.Allowed {
			ev.Outcome, ev.Decision = RefundRefused, d
		} else if err == nil {
			req.Refund = true
			ev.Decision, err = a.Decide(ctx, h.m.Store, req)
		}
		if err != nil {
			ev.Outcome, ev.Decision, ev.Err = StoreError, ratelimit.Decision{}, err
		}
		ev.Latency = time.Since(t0)
		h.observe(ev)
	}
}
