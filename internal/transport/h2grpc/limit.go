package h2grpc

import (
	"net"
	"sync"
)

// LimitListener returns a listener that accepts at most n connections
// from l at once, as golang.org/x/net/netutil's LimitListener does: Accept
// waits while n are open. Unlike that one's, its TCP connections still
// let a Server read and write their sockets without the scheduler's
// bookkeeping (a wrapped connection hides its socket, so the Server
// would read and write it through net.Conn). n <= 0 is no limit.
func LimitListener(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	release := func() { <-l.sem }
	if tc, ok := c.(*net.TCPConn); ok {
		return &limitTCPConn{TCPConn: tc, slot: slot{release: release}}, nil
	}
	return &limitConn{Conn: c, slot: slot{release: release}}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitTCPConn is a TCP connection of a limitListener: a Server reads
// and writes the TCPConn's socket (rawconn).
type limitTCPConn struct {
	*net.TCPConn
	slot
}

func (c *limitTCPConn) Close() error { return c.free(c.TCPConn.Close()) }

// limitConn is any other connection of a limitListener.
type limitConn struct {
	net.Conn
	slot
}

func (c *limitConn) Close() error { return c.free(c.Conn.Close()) }

// slot is a connection's place under the listener's limit, given back
// once, at the first Close.
type slot struct {
	once    sync.Once
	release func()
}

// free gives the slot back and returns err, the Close's.
func (s *slot) free(err error) error {
	s.once.Do(s.release)
	return err
}
