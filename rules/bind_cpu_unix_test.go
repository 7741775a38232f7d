//go:build unix

package rules_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time so far: on a machine
// shared with other work, CPU time per operation is steadier than wall
// time.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
