package httplimit

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Refunded is the Outcome of a rule whose charge was given back after the
// response (Middleware.RefundOn).
const Refunded Outcome = 4

// RefundStatuses returns a RefundOn function that matches the given
// statuses (for example 500, 502, 503, 504).
func RefundStatuses(statuses ...int) func(status int) bool {
	set := make(map[int]bool, len(statuses))
	for _, s := range statuses {
		set[s] = true
	}
	return func(status int) bool { return set[status] }
}

// serveNext runs the next handler for an admitted request whose charges
// are as, and gives them back when the response's status satisfies
// RefundOn: the work the caller paid for did not happen (seed 003's
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
	if h.m.RefundOn(status) {
		// The caller may be gone; what it was charged is still owed back.
		h.refund(context.WithoutCancel(r.Context()), as)
	}
}

// refund gives back, rule by rule, what each admitted check was charged.
// A check that was not charged (a shadow denial, a skipped store failure)
// has nothing to give back.
func (h *handler) refund(ctx context.Context, as []applied) {
	for i := range as {
		a := &as[i]
		if !a.d.Allowed || a.failed || a.Request.N <= 0 {
			continue
		}
		req := a.Request
		req.Refund = true
		t0 := time.Now()
		d, err := a.Decide(ctx, h.m.Store, req)
		ev := Event{Rule: a.Rule, Policy: a.policy, Outcome: Refunded, Key: req.Key, Decision: d, Latency: time.Since(t0)}
		if err != nil {
			ev.Outcome, ev.Decision, ev.Err = StoreError, ratelimit.Decision{}, err
		}
		h.observe(ev)
	}
}

// statusWriter records the status of the response it passes on: the
// first final (non-1xx) status written, or 200 on the first Write.
// Unwrap gives http.ResponseController the writer beneath (Flush, Hijack,
// deadlines), and Flush and Hijack are forwarded for callers that assert
// them directly.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if hj, ok := w.ResponseWriter.(http.Hijacker); ok {
		return hj.Hijack()
	}
	return nil, nil, errors.New("httplimit: the response writer cannot be hijacked")
}
