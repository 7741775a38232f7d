package httplimit

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// DefaultAdaptivePolicy is the policy name of an Adaptive middleware whose
// Policy is "".
const DefaultAdaptivePolicy = "adaptive"

// DefaultAdaptiveRetryAfter is the Retry-After of a request refused by an
// Adaptive middleware whose RetryAfter is zero.
const DefaultAdaptiveRetryAfter = time.Second

// Adaptive is middleware that admits each request through an adaptive
// concurrency limit (adaptive.Limiter: Gradient, Vegas). A request over
// the limit is answered at once with 503 Service Unavailable, Retry-After
// and an application/problem+json body, without calling next: the server
// is at its concurrency limit, whoever the caller.
//
// An admitted request's latency is a sample for the limiter when next
// answers below 500; a 503 or 504 answer, or a request whose context hit
// its deadline, counts as dropped (the limit comes down); other 5xx
// answers and cancelled requests say nothing about load and are ignored.
// A panic in next releases the request and goes on up.
//
// The ResponseWriter passed to next is wrapped to see the status; it has
// an Unwrap method, so http.ResponseController still reaches Flush,
// Hijack and the deadlines.
type Adaptive struct {
	// Limiter is the concurrency limit. Required.
	Limiter adaptive.Limiter
	// Policy names the limit in problem bodies and to Refusals.Observe;
	// "" means DefaultAdaptivePolicy.
	Policy string
	// Name says which limiter refused (Refusal.Key), for example the
	// route it limits.
	Name string
	// RetryAfter is the Retry-After of a 503; 0 means
	// DefaultAdaptiveRetryAfter.
	RetryAfter time.Duration
	// Refusals writes the refusals and reports each to its observer (see
	// Middleware.Refusals).
	Refusals *Refusals
}

// Handler returns next behind the limit. With no Limiter it returns next.
func (m *Adaptive) Handler(next http.Handler) http.Handler {
	if m.Limiter == nil {
		return next
	}
	policy := cmp.Or(m.Policy, DefaultAdaptivePolicy)
	return &adaptiveHandler{limiter: m.Limiter, name: m.Name, next: next,
		busy: newOverload(LayerAdaptive, policy, m.RetryAfter, DefaultAdaptiveRetryAfter, m.Refusals)}
}

type adaptiveHandler struct {
	limiter adaptive.Limiter
	name    string
	busy    overload
	next    http.Handler
}

func (h *adaptiveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := h.limiter.Acquire()
	if !ok {
		h.busy.refuse(r.Context(), w, h.name, "the server is at its concurrency limit; retry after the delay in Retry-After")
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	done := false
	defer func() {
		if !done {
			tok.Ignore() // next panicked
		}
	}()
	h.next.ServeHTTP(sw, r)
	done = true
	switch err, status := r.Context().Err(), sw.code(); {
	case errors.Is(err, context.DeadlineExceeded),
		status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		tok.Dropped()
	case err != nil, status >= 500:
		tok.Ignore()
	default:
		tok.Done()
	}
}
