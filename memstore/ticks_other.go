//go:build !amd64

package memstore

// ticks is 0 where no counter is read: the cached clock then never trusts
// its reading on an admission and reads the system clock (see
// cachedClock.exact).
func ticks() int64 { return 0 }

const haveTicks = false
