package httplimit

import (
	"bufio"
	"errors"
	"net"
	"net/http"
)

// statusWriter is the one response recorder of the admission layers: it
// records the status of the response it passes on, the first final
// (non-1xx) status written, or 200 on the first Write or Flush (the
// refunds of Middleware.RefundOn and the samples of Adaptive read it).
// Unwrap gives http.ResponseController the writer beneath (Flush, Hijack,
// deadlines), and Flush and Hijack are forwarded for callers that assert
// them directly.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// code is the status answered: 200 when the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
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
