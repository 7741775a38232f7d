package rawconn

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// conn reads and writes its socket through the connection's poller
// (syscall.RawConn) with sysRead and sysWrite. The functions it gives the
// RawConn, and what they read and write, are made once with the
// connection: a closure made at each call escaped to the heap with the
// variables it shares, 2 allocations a Read or a Write (bench/rls counted
// 4 a call of sluice rls on Redis). Reads take rmu and writes wmu, so
// that concurrent callers keep to their own buffers.
type conn struct {
	net.Conn
	rc syscall.RawConn

	rmu  sync.Mutex
	rd   op
	rdFn func(fd uintptr) bool // rd.read
	wmu  sync.Mutex
	wr   op
	wrFn func(fd uintptr) bool // wr.write
}

// op is one Read or Write under way: its buffer, the bytes done and the
// error.
type op struct {
	p     []byte
	n     int
	errno syscall.Errno
}

// read reads once into o.p, retrying EINTR; false: wait for the poller.
func (o *op) read(fd uintptr) bool { return o.do(fd, sysRead, false) }

// write writes o.p whole, retrying EINTR; false: wait for the poller.
func (o *op) write(fd uintptr) bool { return len(o.p) == 0 || o.do(fd, sysWrite, true) }

// do calls sys on what is left of o.p (not empty): once, or with whole
// until it is all done.
func (o *op) do(fd uintptr, sys func(uintptr, []byte) (int, syscall.Errno), whole bool) bool {
	for {
		m, e := sys(fd, o.p[o.n:])
		switch e {
		case 0:
			o.n += m
			if whole && o.n < len(o.p) {
				continue
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for the poller
		}
		o.errno = e
		return true
	}
}

// maxRawWrite is the largest write made without the scheduler's
// bookkeeping; a larger one may take long enough that the P should go
// to another thread meanwhile, and goes through net.Conn.
const maxRawWrite = 64 << 10

// Wrap returns nc reading and writing its socket with system calls the
// scheduler is not told about, if nc is a *net.TCPConn or a
// *net.UnixConn; any other connection (TLS, a wrapper) is returned as it
// is.
func Wrap(nc net.Conn) net.Conn {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &conn{Conn: nc, rc: rc}
	c.rdFn, c.wrFn = c.rd.read, c.wr.write
	return c
}

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rd = op{p: p}
	err := c.rc.Read(c.rdFn)
	n, errno := c.rd.n, c.rd.errno
	c.rd.p = nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	if len(p) > maxRawWrite {
		return c.Conn.Write(p)
	}
	c.wmu.Lock()
	c.wr = op{p: p}
	err := c.rc.Write(c.wrFn)
	n, errno := c.wr.n, c.wr.errno
	c.wr.p = nil
	c.wmu.Unlock()
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, c.opError("write", errno)
	}
	return n, nil
}

// opError is the error of a failed read or write, as net.Conn's.
func (c *conn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}
