package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// BenchmarkHandler is the gateway's public handler with builtin:echo, with
// limits off (the kill switch) and on (one token bucket per client IP):
// routing, identity, decision, headers, metrics. bench/gateway measures
// the same over real HTTP.
func BenchmarkHandler(b *testing.B) {
	for _, tc := range []struct{ name, disabled string }{{"limits-off", "true"}, {"limits-on", "false"}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg, err := gateway.Parse("bench.yaml", []byte(`
upstream: builtin:echo
disabled: `+tc.disabled+`
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
		})
	}
}
