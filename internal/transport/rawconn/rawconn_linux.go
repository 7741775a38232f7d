package rawconn

import (
	"io"
	"net"
	"os"
	"syscall"
)

// conn reads and writes its socket through the connection's poller
// (syscall.RawConn) with sysRead and sysWrite.
type conn struct {
	net.Conn
	rc syscall.RawConn
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
	return &conn{Conn: nc, rc: rc}
}

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			m, e := sysRead(fd, p)
			switch e {
			case 0:
				n = m
				return true
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller
			}
			errno = e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	if len(p) > maxRawWrite {
		return c.Conn.Write(p)
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := sysWrite(fd, p[n:])
			switch e {
			case 0:
				n += m
				continue
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller
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
		return n, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return n, nil
}
