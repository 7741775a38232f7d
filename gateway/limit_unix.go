//go:build unix

package gateway

import (
	"math"
	"syscall"
)

// fileLimit returns the process's soft limit on open files (Go raises it
// to the hard limit at start), or a large number when unknown.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(rl.Cur)
}
