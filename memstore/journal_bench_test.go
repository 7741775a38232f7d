//go:build unix

package memstore_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// BenchmarkJournal is the charge path of a calendar quota (a fixed window
// of a month, every request admitted and so a change of state) and of a
// plain rate limit (GCRA, per second), on 100k keys, without and with a
// journal (written every 10 ms here, so that its buffer keeps up with the
// benchmark's rate; the default is 1 s). records/s is the rate the
// journal took; dropped/op the share it dropped, its buffer full.
//
//	go test -run '^$' -bench Journal -benchmem ./memstore
func BenchmarkJournal(b *testing.B) {
	keys := benchKeyNames(benchKeys)
	quota := ratelimit.Limit{Rate: 1 << 40, Period: 31 * 24 * time.Hour}
	for _, c := range []struct {
		name  string
		limit ratelimit.Limit
		alg   ratelimit.Algorithm
	}{
		{"quota", quota, ratelimit.FixedWindow},
		{"gcra", benchLimit, ratelimit.GCRA},
	} {
		for _, journal := range []bool{false, true} {
			name := c.name + "/journal=off"
			if journal {
				name = c.name + "/journal=on"
			}
			for _, parallel := range []bool{false, true} {
				mode := "serial"
				if parallel {
					mode = "parallel"
				}
				b.Run(name+"/"+mode, func(b *testing.B) {
					s := memstore.New(memstore.Options{SweepInterval: -1, MaxKeys: -1})
					b.Cleanup(func() { s.Close() })
					if journal {
						if _, err := s.OpenJournal(filepath.Join(b.TempDir(), "journal"), memstore.JournalOptions{Interval: 10 * time.Millisecond}); err != nil {
							b.Fatal(err)
						}
					}
					benchCharges(b, s, c.limit, c.alg, keys, parallel)
				})
			}
		}
	}
}

func benchCharges(b *testing.B, s *memstore.Store, limit ratelimit.Limit, alg ratelimit.Algorithm, keys []string, parallel bool) {
	ctx := context.Background()
	for _, k := range keys {
		if _, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: limit, Algorithm: alg, N: 1}); err != nil {
			b.Fatal(err)
		}
	}
	// Warm up past a few of the journal's writes, so that its buffers
	// have grown to what an interval takes: the timed loop is the steady
	// state.
	req := ratelimit.Request{Limit: limit, Algorithm: alg, N: 1}
	for i, warm := 0, time.Now(); time.Since(warm) < 100*time.Millisecond; i++ {
		req.Key = keys[i%len(keys)]
		s.Apply(ctx, req)
	}
	before := s.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	if parallel {
		var next atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			req := ratelimit.Request{Limit: limit, Algorithm: alg, N: 1}
			i := next.Add(7919)
			for pb.Next() {
				i++
				req.Key = keys[i%uint64(len(keys))]
				if _, err := s.Apply(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for i := range b.N {
			req.Key = keys[i%len(keys)]
			if _, err := s.Apply(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	after := s.Stats()
	b.ReportMetric(float64(after.JournalRecords-before.JournalRecords)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(after.JournalDropped-before.JournalDropped)/float64(b.N), "dropped/op")
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
