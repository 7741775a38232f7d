package httpclient

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// queueServer has 4 workers: past 4 requests in flight, each waits its
// turn, so latency grows with concurrency and throughput does not.
type queueServer struct {
	inflight, peak atomic.Int64
	total          atomic.Int64 // ns of latency served
}

func (s *queueServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	d := 10 * time.Millisecond * time.Duration(max(1, n-3))
	s.total.Add(int64(d))
	time.Sleep(d)
}

// run sends 32 workers × 40 requests through o and returns the peak in
// flight and the mean latency the server saw.
func (s *queueServer) run(t *testing.T, o Options) (int64, time.Duration) {
	o.Transport, o.Rate, o.Burst = handlerTransport{s}, 10000, 100
	c := NewClient(o)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 32 {
		wg.Go(func() {
			for i := range 40 {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("http://api.example/%d/%d", w, i), nil)
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d failed", failed.Load())
	}
	return s.peak.Load(), time.Duration(s.total.Load() / (32 * 40))
}

// TestAdaptiveConcurrency: against a host whose latency grows past 4
// requests in flight, a per-host adaptive limit (Gradient) keeps the
// requests in flight, and so their latency, far below what a fixed cap of
// 32 lets through, and every request still succeeds.
func TestAdaptiveConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fixedPeak, fixedLat := (&queueServer{}).run(t, Options{Concurrency: 32})
		var lim adaptive.Limiter
		peak, lat := (&queueServer{}).run(t, Options{AdaptiveConcurrency: func() adaptive.Limiter {
			lim = adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: adaptive.LimiterOptions{Initial: 20, Seed: 1}})
			return lim
		}})
		t.Logf("fixed 32: peak %d in flight, mean latency %v; adaptive: peak %d, mean %v, limit now %d", fixedPeak, fixedLat, peak, lat, lim.Limit())
		if peak > 20 {
			t.Errorf("adaptive: %d in flight at the peak, above the limit's start of 20", peak)
		}
		if lat*2 > fixedLat {
			t.Errorf("adaptive: mean latency %v, want under half the fixed cap's %v", lat, fixedLat)
		}
	})
}
