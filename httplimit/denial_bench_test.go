package httplimit_test

import (
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

// BenchmarkDenialRefusal is BenchmarkRefusal with a configured denial: a
// 503 with a JSON body holding both placeholders.
func BenchmarkDenialRefusal(b *testing.B) {
	d, err := httplimit.NewDenial(503, `{"error":"slow down","policy":"{policy}","retry_after":{retry_after}}`, "application/json")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkRefusal(b, d)
}
