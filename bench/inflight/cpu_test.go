//go:build unix

package inflight

import (
	"syscall"
	"testing"
)

// cpuTime returns the CPU time (user + system) the process has used, in
// ns. On a machine other processes load, ns/op counts the time the
// benchmark waited for a core; cpu-ns/op (CPU time per operation, summed
// over the cores) does not.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func reportCPU(b *testing.B, start int64) {
	if start > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}
