// Package cputime reads the process's CPU time, for benchmarks that
// report CPU per operation next to wall time (on a machine shared with
// other work, the steadier of the two).
package cputime

import "time"

// Process returns the process's user and system CPU time so far; ok is
// false where the platform does not tell.
func Process() (d time.Duration, ok bool) { return process() }
