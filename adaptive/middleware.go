package adaptive

import (
	"context"
	"errors"
	"net/http"
)

// rejectBody is the RFC 9457 problem document of a refused request.
const rejectBody = `{"type":"about:blank","title":"Service Unavailable","status":503,` +
	`"detail":"the server is at its concurrency limit; retry after the delay in Retry-After"}` + "\n"

// Middleware admits each request to next through l. A request over the
// limit is answered at once with 503 Service Unavailable, "Retry-After: 1"
// and an application/problem+json body (RFC 9457), without calling next.
//
// An admitted request's latency is a sample for l when next answers below
// 500; a 503 or 504 answer, or a request whose context hit its deadline,
// counts as dropped (the limit comes down); other 5xx answers and
// cancelled requests say nothing about load and are ignored. A panic in
// next releases the request and goes on up.
//
// The ResponseWriter passed to next is wrapped to see the status; it has
// an Unwrap method, so http.ResponseController still reaches Flush,
// Hijack and the deadlines.
func Middleware(l Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := l.Acquire()
		if !ok {
			h := w.Header()
			h.Set("Retry-After", "1")
			h.Set("Content-Type", "application/problem+json")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(rejectBody))
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		done := false
		defer func() {
			if !done {
				tok.Ignore() // next panicked
			}
		}()
		next.ServeHTTP(sw, r)
		done = true
		switch err := r.Context().Err(); {
		case errors.Is(err, context.DeadlineExceeded),
			sw.status == http.StatusServiceUnavailable, sw.status == http.StatusGatewayTimeout:
			tok.Dropped()
		case err != nil, sw.status >= 500:
			tok.Ignore()
		default:
			tok.Done()
		}
	})
}

// statusWriter records the status next answers with.
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

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
