package httplimit_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkRefund measures RefundOn's two paths: a response that is not
// refunded (charge: RefundOn 503, the handler answers 200) and one that is
// (refund: the handler answers 503, so every request's charge is given
// back, after the refund budget is spent from), on the memory store and
// on a real redis-server; one token bucket rule so generous that neither
// it nor its budget ever denies, 250 clients.
func BenchmarkRefund(b *testing.B) {
	const big = `
domain: test
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
`
	stores := map[string]func(b *testing.B) ratelimit.Store{
		"memory": func(b *testing.B) ratelimit.Store {
			s := memstore.New(memstore.Options{})
			b.Cleanup(func() { s.Close() })
			return s
		},
		"redis": func(b *testing.B) ratelimit.Store {
			srv := redistest.Start(b)
			s, err := redisstore.Open(context.Background(), srv.URL(), redisstore.Options{Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, name := range []string{"memory", "redis"} {
		store := stores[name](b) // one per store: not a redis-server per round
		for _, path := range []struct {
			name   string
			status int
		}{{"charge", http.StatusOK}, {"refund", http.StatusServiceUnavailable}} {
			b.Run(name+"/"+path.name, func(b *testing.B) {
				mw := &httplimit.Middleware{Store: store, Rules: mustRules(b, big), Domain: "test", Descriptors: identityDescriptors(),
					RefundOn: httplimit.RefundStatuses(http.StatusServiceUnavailable)}
				h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(path.status) }))
				b.ReportAllocs()
				b.ResetTimer()
				serveParallel(b, h)
			})
		}
	}
}
