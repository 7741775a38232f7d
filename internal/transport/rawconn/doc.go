// Package rawconn reads and writes a TCP or Unix socket with system calls
// the Go scheduler is not told about (syscall.RawSyscall), through the
// connection's poller (syscall.RawConn): a read or write that would block
// waits for the poller as net.Conn's do, and deadlines and Close apply as
// to them.
//
// Why: a read or write of a non-blocking socket never blocks, but made as
// an ordinary system call it enters the scheduler's syscall state. The
// first one after the process was idle wakes the runtime's monitor thread
// (sysmon, asleep while every P is idle: a futex call), which then polls
// again (nanosleep); and one that lasts past a tick of the monitor (a
// loopback write carries the peer's receive path and wake-up, tens of µs)
// has its P handed to another thread, which wakes, finds nothing to run
// and sleeps. At a moderate request rate, when each request finds the
// process idle, that is two to three futex and nanosleep calls, and as
// many thread switches, a request: in bench/rls at 10% load (`sluice rls`
// pinned to one CPU with GOMAXPROCS 1, redis-server on the same CPU) they
// were a quarter of the server's system calls, and reading and writing
// both the gRPC and the Redis sockets this way cut its CPU a request by
// about 30% (docs/bench-rls.md, "Fewer wake-ups"). Every socket of the
// process must be read this way for the monitor to stay asleep: one
// ordinary system call after each idle spell wakes it.
//
// Under the race detector the calls are syscall.Read and syscall.Write,
// whose annotations tell the detector that a write to a socket happens
// before the read of what it wrote.
//
// Writes larger than 64 KiB go through net.Conn: they may take long
// enough that another goroutine should have the P meanwhile.
package rawconn
