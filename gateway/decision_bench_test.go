package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testharness/cputime"
)

// BenchmarkDecision is the decision endpoint's hot path on the memory
// store: the original request read from the proxy's headers (forwarded:
// Traefik's and Caddy's; nginx: auth_request's, whose answer is
// rewritten for it), cleaned, routed, the caller resolved from
// X-Forwarded-For (250 clients), one token bucket charged, the answer's
// headers written. cpu-ns/op is the CPU one decision costs.
func BenchmarkDecision(b *testing.B) {
	for _, proxy := range []string{"forwarded", "nginx"} {
		b.Run(proxy, func(b *testing.B) {
			h := benchHandler(b, "decision: {proxy: "+proxy+"}\nidentity: {trusted_proxies: [10.0.0.0/8]}\n")
			var n atomic.Int64
			b.ReportAllocs()
			if c0, ok := cputime.Process(); ok {
				defer func() {
					if c1, ok := cputime.Process(); ok {
						b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
					}
				}()
			}
			b.RunParallel(func(pb *testing.PB) {
				client := "192.0.2." + strconv.Itoa(int(n.Add(1))%250)
				for pb.Next() {
					r := httptest.NewRequest("GET", "/auth", nil)
					r.RemoteAddr = "10.0.0.1:1"
					r.Header = http.Header{"X-Forwarded-For": {client}, "X-Forwarded-Method": {"GET"},
						"X-Forwarded-Uri": {"/api/items?page=2"}, "X-Forwarded-Host": {"api.example"},
						"X-Original-Method": {"GET"}, "X-Original-Uri": {"/api/items?page=2"}}
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

// benchHandler is the public handler of benchGateway(b, extra).
func benchHandler(b *testing.B, extra string) http.Handler { return benchGateway(b, extra).Handler() }

// benchGateway is a gateway serving extra and one route limited per
// client by a token bucket that never runs out; it is closed when b ends.
func benchGateway(b *testing.B, extra string) *gateway.Gateway {
	cfg, err := gateway.Parse("bench.yaml", []byte(extra+`
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
	b.Cleanup(func() { g.Close() })
	return g
}
