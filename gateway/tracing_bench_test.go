package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/otlptest"
)

// BenchmarkHandlerTracing is BenchmarkHandler's limits-on with tracing:
// on, exporting over OTLP/HTTP to an in-process receiver that decodes and
// counts the spans (its work counted too, as a collector's beside the
// server would be): sampled (each request the child of a sampled
// traceparent), and unsampled (sampling_rate: 0, no traceparent). With
// tracing off it is BenchmarkHandler/limits-on.
func BenchmarkHandlerTracing(b *testing.B) {
	for _, tc := range []struct{ name, rate, parent string }{
		{"sampled", "1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, {"unsampled", "0", ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rcv := otlptest.Start(b)
			rcv.Discard()
			b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.HTTPURL)
			h := benchHandler(b, "upstream: builtin:echo\ntracing: {sampling_rate: "+tc.rate+"}\n")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("GET", "/hello", nil)
					r.RemoteAddr = "10.0.0.1:1"
					if tc.parent != "" {
						r.Header["Traceparent"] = []string{tc.parent}
					}
					w := httptest.NewRecorder()
					if h.ServeHTTP(w, r); w.Code != http.StatusOK {
						b.Errorf("status %d", w.Code)
						return
					}
				}
			})
		})
	}
}
