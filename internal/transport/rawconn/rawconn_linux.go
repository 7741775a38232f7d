package h2grpc

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawIO reads and writes a TCP connection's socket with system calls the
// scheduler is not told about (syscall.RawSyscall), through the
// connection's poller (syscall.RawConn): a call that would block waits for
// the poller as net.Conn's do, and deadlines and Close apply as to them.
//
// A read or write of a non-blocking socket does not block; it returns what
// the socket had, or EAGAIN. Made as an ordinary system call, one that
// lasts past a tick of the runtime's monitor (20 µs at first; a loopback
// write carries the peer's receive path and wake-up, tens of µs) has its
// P handed to another thread, which wakes (futex), finds nothing to run
// and sleeps again, while the caller's thread must get a P back: with
// GOMAXPROCS 1, as bench/rls runs the servers, 1.7 futex and 1.3
// nanosleep calls a request at 10% load, a quarter of the server's system
// calls. Writes larger than rawWriteMax go through net.Conn: they may
// take long enough that another goroutine should run meanwhile.
type rawIO struct {
	nc net.Conn
	rc syscall.RawConn
}

// rawWriteMax is the largest write made with RawSyscall.
const rawWriteMax = 64 << 10

// newRawIO returns rawIO for a TCP connection (a LimitListener's too),
// and nc itself for any other (TLS).
func newRawIO(nc net.Conn) io.ReadWriter {
	var tc *net.TCPConn
	switch c := nc.(type) {
	case *net.TCPConn:
		tc = c
	case *limitTCPConn:
		tc = c.TCPConn
	default:
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	return &rawIO{nc: nc, rc: rc}
}

func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			m, e := sysRead(fd, p)
			switch e {
			case 0:
				n = m
				return true
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			errno = e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawIO) Write(p []byte) (int, error) {
	if len(p) > rawWriteMax {
		return r.nc.Write(p)
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := sysWrite(fd, p[n:])
			switch e {
			case 0:
				n += m
				continue
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			errno = e
			return true
		}
		return true
	})
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}
