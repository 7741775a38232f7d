// Package heapfloor keeps a server's garbage collector from running on a
// heap of a few megabytes.
//
// The Go collector starts a cycle when the heap has grown by GOGC percent
// (100 by default) over what the last cycle left live. A proxy's live heap
// is small (a few MiB: its config, tables, metrics and the descriptors of
// the protocols linked in) while every request allocates a few KiB, so the
// collector runs tens of times a second under load, and each cycle marks
// the whole live heap again: on `sluice serve` that was about a fifth of
// the CPU a proxied request costs. A floor is a block of memory that
// counts as live but is never written: the heap goal becomes twice the
// live heap plus twice the floor, so cycles are that many times rarer,
// while the block itself, never touched, takes no resident memory.
//
// The bound: the heap grows to at most about twice the live heap plus
// twice the floor between cycles (2 × 16 MiB with DefaultBytes on a small
// heap). An operator who tunes the collector (GOGC or GOMEMLIMIT set) gets
// no floor: the settings are theirs.
package heapfloor

import (
	"os"
	"runtime"
)

// DefaultBytes is the floor servers keep.
const DefaultBytes = 16 << 20

// Size is the floor to keep for a wanted size n and the environment
// getenv reads: n, or 0 when GOGC or GOMEMLIMIT is set (the operator's
// tuning wins) or n is not positive.
func Size(n int, getenv func(string) string) int {
	if n <= 0 || getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return n
}

// Keep allocates a floor of Size(n, os.Getenv) bytes and keeps it until
// release is called (a server calls it when it stops serving).
func Keep(n int) (release func()) {
	n = Size(n, os.Getenv)
	if n == 0 {
		return func() {}
	}
	// Never written: a fresh span from the OS is zero already, so its
	// pages are not touched and stay out of the resident set.
	floor := make([]byte, n)
	return func() { runtime.KeepAlive(floor) }
}
