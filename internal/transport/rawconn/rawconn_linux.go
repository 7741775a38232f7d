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
// 4 a call of sluice rls on Redis). Reads take rd's mutex and writes
// wr's, so that concurrent callers keep to their own buffers.
type conn struct {
	net.Conn
	rc syscall.RawConn

	rd, wr way
}

// way is one direction of a conn: its op under way, the mutex that
// holds it for one caller, and the RawConn's callback (op.read or
// op.write, bound to the op).
type way struct {
	mu sync.Mutex
	op op
	fn func(fd uintptr) bool
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
	c.rd.fn, c.wr.fn = c.rd.op.read, c.wr.op.write
	return c
}

// do reads into p (write false) or writes p whole through the RawConn,
// holding w for the caller.
func (c *conn) do(w *way, p []byte, write bool) (int, syscall.Errno, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.op = op{p: p}
	var err error
	if write {
		err = c.rc.Write(w.fn)
	} else {
		err = c.rc.Read(w.fn)
	}
	n, errno := w.op.n, w.op.errno
	w.op.p = nil
	return n, errno, err
}

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := c.do(&c.rd, p, false)
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
	n, errno, err := c.do(&c.wr, p, true)
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
