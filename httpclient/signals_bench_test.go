package httpclient

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkParseBudget: the IETF fields of a gateway's answer with two
// policies, read on every response.
func BenchmarkParseBudget(b *testing.B) {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"per-user";q=100;w=60, "burst";q=10;w=1`)
	h.Set("RateLimit", `"per-user";r=42;t=17, "burst";r=3;t=1`)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseBudget(h, now); !ok {
			b.Fatal("no budget")
		}
	}
}
