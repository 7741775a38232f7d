package memstore

// ticks reads the processor's time-stamp counter (RDTSC): about a third of
// a system clock read, and what the Linux vDSO itself reads when the
// kernel's clocksource is tsc (the only case in which it is used, see
// ticksTrusted). It is not a clock (its rate is measured against the
// monotonic clock, see tickRate); the cached clock uses it only to tell
// whether its reading is recent.
func ticks() int64

// haveTicks reports whether ticks reads a counter.
const haveTicks = true
