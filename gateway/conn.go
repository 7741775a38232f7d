package gateway

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connMetrics count each listener's connections.
type connMetrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	evicted *prometheus.CounterVec
	proxy   *prometheus.CounterVec // PROXY protocol rejections, by reason
}

func newConnMetrics(reg prometheus.Registerer) (*connMetrics, error) {
	m := &connMetrics{
		open: gaugeVec("connections_open", "Connections open now, by listener (public, admin).", "listener"),
		refused: counterVec("connections_refused_total",
			"Connections closed on accept because the listener was at its max and none was idle.", "listener"),
		evicted: counterVec("connections_evicted_total",
			"Idle keep-alive connections closed to make room for a new one at the listener's max.", "listener"),
		proxy: counterVec("proxy_protocol_rejected_total",
			"Public connections closed by proxy_protocol: untrusted (a peer not in trusted, with required), invalid (a header malformed, oversized, late, or missing with required; not a connection closed before its first byte).",
			"reason"),
	}
	if err := registerAll(reg, m.open, m.refused, m.evicted, m.proxy); err != nil {
		return nil, err
	}
	return m, nil
}

// connLimiter caps a listener's open connections. At the cap, a new
// connection closes the connection idle the longest (an HTTP keep-alive
// connection waiting for its next request: its client reconnects at
// worst) and takes its place, as nginx reuses keep-alive connections
// when it runs out; when no connection is idle, the new one is accepted
// and closed at once, so that its client learns at once instead of
// waiting in the kernel's backlog, and the refusal is counted.
//
// A connection is idle between http.StateIdle and the next state
// (http.Server.ConnState feeds connState). Connections that are new
// (no complete request yet) are not evicted: read_header_timeout bounds
// them.
type connLimiter struct {
	max     int
	open    prometheus.Gauge
	refused prometheus.Counter
	evicted prometheus.Counter

	mu   sync.Mutex
	n    int      // open connections
	idle connList // longest idle first
}

// connList is a doubly linked list of connections threaded through them,
// so that a connection going idle and active again, twice per request on
// a keep-alive connection, allocates nothing (container/list allocates an
// element per push).
type connList struct{ head, tail *limitedConn }

func (l *connList) pushBack(c *limitedConn) {
	c.prev, c.next, c.listed = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *connList) remove(c *limitedConn) {
	if !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}

func newConnLimiter(max int, m *connMetrics, listener string) *connLimiter {
	return &connLimiter{
		max:     max,
		open:    m.open.WithLabelValues(listener),
		refused: m.refused.WithLabelValues(listener),
		evicted: m.evicted.WithLabelValues(listener),
	}
}

// listener wraps ln: Accept returns only connections within the cap.
func (l *connLimiter) listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ln.l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit returns c counted, or closes it and returns nil.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	l.mu.Lock()
	if l.n >= l.max {
		victim := l.idle.head
		if victim == nil {
			l.mu.Unlock()
			// Counted before the close: a client that sees its connection
			// closed then finds it counted.
			l.refused.Inc()
			c.Close()
			return nil
		}
		l.idle.remove(victim)
		l.mu.Unlock()
		l.evicted.Inc()
		victim.Close() // releases its place
		l.mu.Lock()
	}
	l.n++
	l.open.Set(float64(l.n))
	l.mu.Unlock()
	return &limitedConn{Conn: c, l: l}
}

// connState is the http.Server's ConnState hook: it keeps the list of
// idle connections.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.closed {
		return
	}
	switch st {
	case http.StateIdle:
		if !lc.listed {
			l.idle.pushBack(lc)
		}
	default:
		l.idle.remove(lc)
	}
}

// release takes c out of the count.
func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.closed = true
	l.idle.remove(c)
	l.n--
	l.open.Set(float64(l.n))
}

// limitedConn is a connection counted by its connLimiter until closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
	// guarded by l.mu
	prev, next *limitedConn // in l.idle, when listed
	listed     bool
	closed     bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// withDeadlines bounds reading a request's body by read (from the end of
// its headers) and, when write > 0, writing its response by write. The
// body's deadline is lifted once the body is read, so that it does not
// cut the rest of the exchange (http.Server.ReadTimeout would: the
// server's background read of the connection hits it and cancels the
// request's context).
func withDeadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hasBody := r.Body != nil && r.Body != http.NoBody
		if hasBody || write > 0 {
			rc := http.NewResponseController(w)
			now := time.Now()
			if write > 0 {
				rc.SetWriteDeadline(now.Add(write))
			}
			if hasBody && read > 0 && rc.SetReadDeadline(now.Add(read)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline at the end of the
// body.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// setWriteDeadline bounds writing r's response by d from now, when w
// supports it.
func setWriteDeadline(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
	}
}
