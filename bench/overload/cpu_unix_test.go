//go:build unix

package overload

import "syscall"

// cpuTime returns the CPU time (user + system) the process has used, in
// ns, every thread counted: on a shared machine, CPU per operation moves
// less with the load than wall time does.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
