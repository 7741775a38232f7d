// Package envoystyle is a server for tests and benchmarks that answers
// as Envoy's rate limit filter in front of envoyproxy/ratelimit does with
// enable_x_ratelimit_headers (DRAFT_VERSION_03): a fixed window aligned
// to the Unix epoch, announced in X-RateLimit-Limit ("200, 200;w=2"),
// -Remaining and -Reset (seconds to the window's end, rounded up), and a
// bare 429 when spent. It has no robots.txt (404).
package envoystyle

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Server is the handler: Limit requests per Window (whole seconds), one
// budget for every caller. Its zero counts are ready; Limit and Window
// must be set.
type Server struct {
	Limit  int
	Window time.Duration

	mu          sync.Mutex
	win         int64
	used        int
	ok, refused int
}

func (e *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	now := time.Now()
	e.mu.Lock()
	if win := now.UnixNano() / int64(e.Window); win != e.win {
		e.win, e.used = win, 0
	}
	allowed := e.used < e.Limit
	if allowed {
		e.used++
		e.ok++
	} else {
		e.refused++
	}
	used := e.used
	end := time.Unix(0, (e.win+1)*int64(e.Window))
	e.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", fmt.Sprintf("%d, %d;w=%d", e.Limit, e.Limit, int64(e.Window/time.Second)))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(e.Limit-used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(int64((end.Sub(now)+time.Second-1)/time.Second), 10))
	if !allowed {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok\n")
}

// Counts returns the requests taken and refused so far (robots.txt
// aside).
func (e *Server) Counts() (ok, refused int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ok, e.refused
}
