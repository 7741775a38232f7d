// Package pin binds benchmark processes to CPUs of their own.
//
// On a small machine the load generator, the server under test and Redis
// compete for the same cores, and the side that spends more threads takes
// CPU from the others: a ratio then measures the scheduler as much as the
// contenders. Production runs Redis (and a rate limit service) on cores or
// hosts of their own, and a server is benchmarked the same way, with the
// load generator kept off its CPUs. The comparison programs in bench/ use
// this package to give redis-server (and the servers under test) their own
// CPUs, the same for every contender, and say so in their output.
//
// Binding is Linux's sched_setaffinity, applied to every thread of a
// process; threads started later inherit it from the thread that starts
// them. Elsewhere the functions return ErrUnsupported.
package pin
