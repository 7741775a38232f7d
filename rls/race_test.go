//go:build race

package rls_test

// raceEnabled: the race detector is on; sync.Pool drops some of what it
// is given, so allocation counts do not hold.
const raceEnabled = true
