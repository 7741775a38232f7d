package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// BenchmarkHandlerAccessLog is BenchmarkHandler's limits-on with
// access_log on (a file, every decision, max_per_second high enough that
// no line is dropped for the bound): the cost of a line a request.
func BenchmarkHandlerAccessLog(b *testing.B) {
	file := filepath.Join(b.TempDir(), "access.log")
	cfg, err := gateway.Parse("bench.yaml", []byte(`
upstream: builtin:echo
access_log: {file: `+file+`, max_per_second: 1000000}
routes:
  - path: /
    rate_limits:
      - actions: [{identity: {}}]
rules:
  domain: bench
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
`))
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	h := g.Handler()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		remote := "10.0.0." + strconv.Itoa(int(n.Add(1))%250) + ":1"
		for pb.Next() {
			r := httptest.NewRequest("GET", "/hello", nil)
			r.RemoteAddr = remote
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Errorf("status %d", w.Code)
				return
			}
		}
	})
}
