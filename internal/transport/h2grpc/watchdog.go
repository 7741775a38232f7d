package h2grpc

import (
	"log/slog"
	"net"
	"time"

	"golang.org/x/net/http2"
)

// watchdog makes a connection's streams progress (StreamLimits), on the
// Server's connections and Guard's alike: it ticks four times per the
// shorter timeout while the connection has a stream open or a write
// under way, and stops otherwise, so an idle connection costs no
// wake-ups. Streams note the tick they opened, or began to wait on the
// client: the hot path reads no clock. Its fields are under its
// connection's mutex.
type watchdog struct {
	timer      *time.Timer // nil: no timeout to check
	period     time.Duration
	watching   bool   // timer is armed
	tick       uint32 // ticks so far
	writes     uint64 // writes to the socket that have returned
	seenWrites uint64 // writes at the last tick
	stuckTicks uint32 // ticks the write under way has been under way
}

// init makes the timer, which calls f at each tick, if there is a
// period.
func (w *watchdog) init(period time.Duration, f func()) {
	if period > 0 {
		w.period = period
		w.timer = time.AfterFunc(time.Duration(1<<62), f)
		w.timer.Stop()
	}
}

// armLocked starts ticking unless ticking already, or the connection
// has ended.
func (w *watchdog) armLocked(ended bool) {
	if w.timer != nil && !w.watching && !ended {
		w.watching = true
		w.timer.Reset(w.period)
	}
}

func (w *watchdog) stopLocked() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.watching = false
}

// stepLocked counts a tick, and reports whether the write under way (if
// writing) has been under way for more than limit ticks (0: no limit).
func (w *watchdog) stepLocked(writing bool, limit uint32) (stuck bool) {
	w.tick++
	if writing && w.writes == w.seenWrites {
		w.stuckTicks++
		return limit > 0 && w.stuckTicks > limit
	}
	w.stuckTicks, w.seenWrites = 0, w.writes
	return false
}

// againLocked ticks again if there is more to watch, else stops.
func (w *watchdog) againLocked(more bool) {
	if more {
		w.timer.Reset(w.period)
	} else {
		w.watching = false
	}
}

// endStalled ends a connection as its watchdog found it: closed at once
// when a write is stuck (nothing more can be written), else with a
// GOAWAY NO_ERROR carrying reason, if there is one.
func endStalled(log *slog.Logger, remote net.Addr, stuck bool, reason string, closeNow func(), goAway func(http2.ErrCode, string)) {
	switch {
	case stuck:
		log.Debug("h2grpc: closing a connection whose client does not read", "remote", remote)
		closeNow()
	case reason != "":
		goAway(http2.ErrCodeNo, reason)
	}
}

// onTick checks the connection's streams and its write under way, and
// ends the connection if one has stalled.
func (c *conn) onTick() {
	c.mu.Lock()
	if c.closed {
		c.wd.watching = false
		c.mu.Unlock()
		return
	}
	stuck := c.wd.stepLocked(c.writing > 0, c.srv.lim.write)
	reason := c.stalledLocked()
	if c.closeAfterFlush {
		reason = "" // ending already
	}
	c.wd.againLocked(len(c.streams) > 0 || c.writing > 0)
	c.mu.Unlock()
	endStalled(c.srv.opts.Logger, c.nc.RemoteAddr(), stuck, reason, c.abort,
		func(code http2.ErrCode, reason string) { c.fail(connError{code, reason}) })
}

// stalledLocked reports why the connection is to end, if it is: a
// stream whose request has not arrived whole within RequestTimeout
// ("stalled_request"), or one whose answer has waited on the client for
// WriteTimeout ("stalled_write"). c.mu is held.
func (c *conn) stalledLocked() (reason string) {
	lim := &c.srv.lim
	for _, st := range c.streams {
		if lim.request > 0 && !st.dispatched && c.wd.tick-st.since > lim.request && (st.bidi == nil || st.bidi.err == nil) {
			return "stalled_request"
		}
		if lim.write > 0 && st.stalled && c.wd.tick-st.stallSince > lim.write {
			return "stalled_write"
		}
	}
	return ""
}
