package httpclient

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// throttle is a test server that limits all requests with one token bucket
// in a memstore, like the servers sluice protects.
type throttle struct {
	store      *memstore.Store
	limit      ratelimit.Limit
	retryAfter bool // send Retry-After (delta-seconds, rounded up)
	// slowdown adds latency proportional to the load (requests in flight)
	// before the bucket throttles: a server that slows before it refuses.
	slowdown time.Duration

	inflight atomic.Int64
	mu       sync.Mutex
	status   map[int]int
}

func newThrottle(t testing.TB, limit ratelimit.Limit, retryAfter bool) *throttle {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return &throttle{store: s, limit: limit, retryAfter: retryAfter, status: map[int]int{}}
}

func (s *throttle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
	}
	if s.slowdown > 0 {
		time.Sleep(time.Duration(n) * s.slowdown)
	}
	d, err := s.store.Apply(r.Context(), ratelimit.Request{Key: "all", Limit: s.limit, Algorithm: ratelimit.TokenBucket, N: 1})
	code := http.StatusOK
	switch {
	case err != nil:
		code = http.StatusInternalServerError
	case !d.Allowed:
		code = http.StatusTooManyRequests
		if s.retryAfter {
			w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.DurationCeil(d.RetryAfter), 10))
		}
	}
	s.mu.Lock()
	s.status[code]++
	s.mu.Unlock()
	w.WriteHeader(code)
	fmt.Fprintln(w, http.StatusText(code))
}

func (s *throttle) count(code int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status[code]
}

// handlerTransport serves requests with a handler in process, so that
// tests of waiting code can run inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	ht.h.ServeHTTP(rec, r)
	if r.Body != nil {
		r.Body.Close()
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// script answers each request with the next of a list of handlers (the
// last one repeats) and records when each came.
type script struct {
	mu    sync.Mutex
	steps []http.HandlerFunc
	at    []time.Time
	body  []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	i := min(len(s.at), len(s.steps)-1)
	s.at = append(s.at, time.Now())
	s.body = append(s.body, string(b))
	h := s.steps[i]
	s.mu.Unlock()
	h(w, r)
}

func (s *script) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprint(w, http.StatusText(code))
	}
}
