package eventlog_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/server/eventlog"
)

// BenchmarkReport measures Report in the steady state: the pairs tracked,
// the interval's samples taken. One rule is the worst case for contention
// (every report adds to the same counter).
func BenchmarkReport(b *testing.B) {
	storeErr := errors.New("store: connection refused")
	for _, bc := range []struct {
		name  string
		rules int
		err   error
	}{
		{"one-rule", 1, nil},
		{"16-rules", 16, nil},
		{"one-rule-error", 1, storeErr},
	} {
		names := make([]string, bc.rules)
		for i := range names {
			names[i] = fmt.Sprint("api_per_user_", i)
		}
		b.Run(bc.name+"/serial", func(b *testing.B) {
			l := eventlog.New(nil, eventlog.Options{})
			defer l.Close()
			for _, n := range names {
				for range 100 {
					l.Report(eventlog.StoreError, n, "10.0.0.7", bc.err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Report(eventlog.StoreError, names[i%len(names)], "10.0.0.7", bc.err)
				i++
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			l := eventlog.New(nil, eventlog.Options{})
			defer l.Close()
			for _, n := range names {
				for range 100 {
					l.Report(eventlog.StoreError, n, "10.0.0.7", bc.err)
				}
			}
			var seed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7))
				for pb.Next() {
					l.Report(eventlog.StoreError, names[i%len(names)], "10.0.0.7", bc.err)
					i++
				}
			})
		})
	}
}
