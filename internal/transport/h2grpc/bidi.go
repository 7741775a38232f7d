package h2grpc

import (
	"encoding/binary"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Methods that stream from the client (client-streaming and bidi, such as
// gRPC server reflection's ServerReflectionInfo) run their handler from
// the call's HEADERS on, and get each request message as it arrives: the
// unary and server-streaming paths, which read a request whole before the
// handler runs, are not theirs. They keep the same bounds, a message at a
// time:
//
//   - A message is at most the stream's window less its 5-byte prefix
//     (65530 bytes with the default Options), and at most MaxRecvMsgSize:
//     a larger one ends the call RESOURCE_EXHAUSTED. A stream gets no
//     grant past its window; the credit of a message goes back (stream
//     and connection WINDOW_UPDATE) once the handler has taken it
//     (RecvMsg), so a handler that does not read stops its client.
//   - Progress per message: from the HEADERS, and from each message
//     received or taken, the next message or the end of the stream
//     (END_STREAM) must arrive within RequestTimeout, else the
//     connection ends ("stalled_request"), as a stalled unary request
//     does. Writes are bounded as every stream's (WriteTimeout).
//   - At most maxBidiStreams such calls open on a connection; the next
//     is answered RESOURCE_EXHAUSTED. They count against
//     MaxConcurrentStreams as every call does.
//
// The call ends when its handler returns; if the client has not ended
// its side yet, the status is followed by RST_STREAM NO_ERROR.

// maxBidiStreams bounds the calls that stream from the client open at
// once on one connection.
const maxBidiStreams = 8

// bidiState is the reading side of a call that streams from the client.
type bidiState struct {
	wake chan struct{} // a message, the end or an error is there for the handler

	in []byte // the message being received; the reading goroutine's

	// Under c.mu.
	msgs [][]byte       // messages received, gRPC-framed, not yet taken
	err  *status.Status // the call is to end so (a message too large or truncated)
}

// openBidi starts a call of m, a method that streams from the client, on
// stream id, and runs its handler.
func (c *conn) openBidi(id uint32, end bool, m *method, r *request) error {
	c.mu.Lock()
	full := c.bidiStreams >= maxBidiStreams
	c.mu.Unlock()
	if full {
		return c.reject(id, end, 200, status.Newf(codes.ResourceExhausted,
			"h2grpc: %d calls that stream from the client are open on this connection, the most it takes", maxBidiStreams))
	}
	st := c.addStream(id, m, r, &bidiState{wake: make(chan struct{}, 1)})
	c.handlers.Add(1)
	c.srv.dispatch(st)
	if end {
		return c.onBidiData(st, nil, true)
	}
	return nil
}

// bidiMaxMsg is the largest message a call that streams from the client
// takes: its window's worth, less the prefix, and MaxRecvMsgSize.
func (c *conn) bidiMaxMsg() int64 {
	return min(c.srv.lim.streamWin-5, int64(c.srv.opts.MaxRecvMsgSize))
}

// onBidiData takes data (and the end of the stream, if end) on st, a
// call that streams from the client: each message whole is handed to the
// handler. Called by the reading goroutine, after takeData counted data
// against the windows.
func (c *conn) onBidiData(st *stream, data []byte, end bool) error {
	b := st.bidi
	b.in = append(b.in, data...)
	var msgs [][]byte
	var bad *status.Status
	for len(b.in) >= 5 {
		n := int64(binary.BigEndian.Uint32(b.in[1:5]))
		if max := c.bidiMaxMsg(); n > max {
			bad = status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, max)
			b.in = nil
			break
		}
		if int64(len(b.in)) < 5+n {
			break
		}
		msgs = append(msgs, append([]byte(nil), b.in[:5+n]...))
		b.in = append(b.in[:0], b.in[5+n:]...)
	}
	if end && bad == nil && len(b.in) > 0 {
		bad = status.New(codes.Internal, "h2grpc: the request's message is truncated")
	}
	c.mu.Lock()
	if !st.reset {
		b.msgs = append(b.msgs, msgs...)
		if len(msgs) > 0 {
			c.progress += uint64(len(msgs))
			st.since = c.wd.tick
		}
		if bad != nil && b.err == nil {
			b.err = bad
		}
		if end {
			st.dispatched = true
		}
	}
	c.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// recvNext reads the next request message of a call that streams from
// the client into m, waiting for it; io.EOF once the client has ended
// its side. The message's credit goes back to the client.
func (st *stream) recvNext(m any) error {
	c, b := st.c, st.bidi
	for {
		c.mu.Lock()
		if len(b.msgs) > 0 {
			msg := b.msgs[0]
			b.msgs[0] = nil
			b.msgs = b.msgs[1:]
			st.giveBackMsgLocked(int64(len(msg)))
			c.mu.Unlock()
			body, bad := grpcMessage(msg, st.encoding)
			if bad != nil {
				return bad.Err()
			}
			return unmarshal(body, m)
		}
		var err error
		switch {
		case b.err != nil:
			err = b.err.Err()
		case st.dispatched:
			err = io.EOF
		case st.reset || c.closed:
			err = errStreamDone
		}
		c.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-b.wake:
		case <-st.ctx.Done():
			return status.FromContextError(st.ctx.Err()).Err()
		}
	}
}

// giveBackMsgLocked gives back the n bytes of a message the handler has
// taken: to the connection's window, and to the stream's while the client
// may still send on it. c.mu is held.
func (st *stream) giveBackMsgLocked(n int64) {
	c := st.c
	if !st.released {
		st.held -= n
		c.giveBackLocked(n)
	}
	if !st.dispatched && !st.reset && !c.closed {
		st.recvLimit += n
		c.wbuf = appendWindowUpdate(c.wbuf, st.id, n)
	}
	st.since = c.wd.tick
	c.kickLocked()
}
