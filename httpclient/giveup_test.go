package httpclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// TestGiveUpLastAnswerRealServer: over loopback, a server that answers
// 503 with no Retry-After every time: the retries follow the configured
// backoff, every attempt the client counts reached the server, and the
// error that ends them carries the last answer (status, header, the
// start of its body, bounded), its connection's body read once.
func TestGiveUpLastAnswerRealServer(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", MaxErrorBody+10)
	var sent atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := sent.Add(1)
		w.Header().Set("X-Attempt", strings.Repeat("i", int(n)))
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("down for maintenance " + big))
	}))
	defer hs.Close()
	var attempts atomic.Int64
	c := NewClient(Options{MaxAttempts: 3, Backoff: backoff.Constant(time.Millisecond), Rate: 1000, Burst: 10, Ramp: -1,
		Observer: ObserverFunc(func(e Event) {
			if e.Kind == Attempt {
				attempts.Add(1)
			}
		})})
	resp, err := c.Get(hs.URL + "/x")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %s, want the error of the last attempt", resp.Status)
	}
	se, ok := errors.AsType[*StatusError](err)
	if !ok {
		t.Fatalf("error %v, want a StatusError", err)
	}
	if se.StatusCode != 503 || se.Header.Get("X-Attempt") != "iii" || !strings.HasPrefix(string(se.Body), "down for maintenance") ||
		len(se.Body) != MaxErrorBody || !se.Truncated {
		t.Errorf("StatusError %d %q, body %d bytes (truncated %v), want the third answer's, %d bytes", se.StatusCode, se.Header.Get("X-Attempt"),
			len(se.Body), se.Truncated, MaxErrorBody)
	}
	if sent.Load() != 3 || attempts.Load() != 3 {
		t.Errorf("%d attempts counted, %d reached the server; want 3 and 3", attempts.Load(), sent.Load())
	}
}
