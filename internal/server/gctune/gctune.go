// Package gctune is the servers' one policy for the Go garbage collector:
// it keeps the collector from running on a heap of a few megabytes.
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
//
// The other lever is the collector's target percent (GOGC), which grows
// the heap with the live one instead. Both servers take both as flags
// (Policy.AddFlags: --heap-floor-mib and --gc-percent), each with its own
// defaults, and both yield to GOGC or GOMEMLIMIT in the environment.
package gctune

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
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

// Policy is a server's collector policy, set by its flags.
type Policy struct {
	FloorMiB  int // --heap-floor-mib: the floor Keep keeps, MiB; 0: none
	GCPercent int // --gc-percent: the collector's target percent; 0: the runtime's
}

// AddFlags registers --heap-floor-mib and --gc-percent on fs, with p's
// values as their defaults.
func (p *Policy) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&p.FloorMiB, "heap-floor-mib", p.FloorMiB, "`MiB` of heap the Go collector counts as live but that is never written (nor resident), so that it does not run tens of times a second over a live heap of a few MiB; 0: none. GOGC or GOMEMLIMIT set turns it off")
	fs.IntVar(&p.GCPercent, "gc-percent", p.GCPercent, "the Go collector's target `PERCENT` (as GOGC): a larger one spends memory growing with the live heap on less collection CPU; 0 keeps the runtime's 100. GOGC or GOMEMLIMIT set turns it off")
}

// Check reports a flag's value out of range.
func (p Policy) Check() error {
	if p.FloorMiB < 0 || p.FloorMiB > 1<<14 {
		return fmt.Errorf("--heap-floor-mib %d: want 0 to 16384", p.FloorMiB)
	}
	if p.GCPercent < 0 {
		return fmt.Errorf("--gc-percent %d is negative", p.GCPercent)
	}
	return nil
}

// Apply sets the policy for the process until restore is called (a
// server calls it when it stops serving); it does nothing when GOGC or
// GOMEMLIMIT is set.
func (p Policy) Apply() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	release := Keep(p.FloorMiB << 20)
	if p.GCPercent <= 0 {
		return release
	}
	old := debug.SetGCPercent(p.GCPercent)
	return func() { debug.SetGCPercent(old); release() }
}
