//go:build unix

package core

import "syscall"

// cpuTime returns the CPU time (user + system) the process has used, in
// ns: every thread, so the runtime's and the contenders' own goroutines
// (sweepers, clock tickers) count too.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
