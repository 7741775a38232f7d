package h2grpc

import "golang.org/x/net/http2"

// The watchdog makes a connection's streams progress (StreamLimits): it
// ticks four times per the shorter timeout while the connection has a
// stream open or a write under way, and stops otherwise, so an idle
// connection costs no wake-ups. Streams note the tick they opened, or
// began to wait on the client, under c.mu: the hot path reads no clock.

// watchLocked arms the watchdog unless it is ticking. c.mu is held.
func (c *conn) watchLocked() {
	if c.watch != nil && !c.watching && !c.closed {
		c.watching = true
		c.watch.Reset(c.srv.lim.tick)
	}
}

// onTick checks the connection's streams and its write under way, ends
// the connection if one has stalled, and ticks again while there is
// something to watch.
func (c *conn) onTick() {
	c.mu.Lock()
	if c.closed {
		c.watching = false
		c.mu.Unlock()
		return
	}
	c.tick++
	reason, stuck := c.stalledLocked()
	if c.closeAfterFlush {
		reason = "" // ending already
	}
	if len(c.streams) > 0 || c.writing > 0 {
		c.watch.Reset(c.srv.lim.tick)
	} else {
		c.watching = false
	}
	c.mu.Unlock()
	switch {
	case stuck:
		// Nothing more can be written: close without a GOAWAY.
		c.srv.opts.Logger.Debug("h2grpc: closing a connection whose client does not read", "remote", c.nc.RemoteAddr())
		c.abort()
	case reason != "":
		c.fail(connError{http2.ErrCodeNo, reason})
	}
}

// stalledLocked reports why the connection is to end, if it is: a
// stream whose request has not arrived whole within RequestTimeout
// ("stalled_request"), or one whose answer has waited on the client for
// WriteTimeout ("stalled_write"); or, as stuck, a write to the socket
// under way for WriteTimeout. c.mu is held.
func (c *conn) stalledLocked() (reason string, stuck bool) {
	lim := &c.srv.lim
	if c.writing > 0 && c.writes == c.seenWrites {
		c.stuckTicks++
		if lim.write > 0 && c.stuckTicks > lim.write {
			return "", true
		}
	} else {
		c.stuckTicks = 0
		c.seenWrites = c.writes
	}
	for _, st := range c.streams {
		if lim.request > 0 && !st.dispatched && c.tick-st.since > lim.request {
			return "stalled_request", false
		}
		if lim.write > 0 && st.stalled && c.tick-st.stallSince > lim.write {
			return "stalled_write", false
		}
	}
	return "", false
}
