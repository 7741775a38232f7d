package h2grpc

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// stream is one call. Its handler runs once the client has sent the whole
// request; for a server-streaming method, the stream is the handler's
// grpc.ServerStream.
type stream struct {
	c        *conn
	id       uint32
	since    uint32 // the watchdog's tick when it opened (set before the stream is shared)
	m        *method
	ctx      callCtx
	encoding string
	md       metadata.MD // the request's fields of Options.Metadata; nil when none
	buf      *[]byte     // the request body, gRPC-framed: the reader's until dispatched, then the handler's

	// The reading goroutine's.
	recvBytes int64 // flow-controlled bytes received on the stream, padding included
	msgLen    int64 // the request message's declared length; -1 until its prefix is in

	// Under c.mu.
	dispatched  bool   // the request is complete and its handler runs
	stalled     bool   // a write of the answer waits on the client
	stallSince  uint32 // the watchdog's tick when it began to wait
	recvLimit   int64  // the stream's receive window in all: the initial one and what was granted
	held        int64  // request bytes counted against the connection's window
	grant       int64  // credit granted from the connection's large-message reserve
	need        int64  // credit waited for (in c.reserveQ); 0 if none
	released    bool   // held and grant have been given back
	sendWin     int64
	reset       bool // reset by either side, or the connection ended: write nothing
	headersSent bool

	// The handler's (server-streaming methods).
	header, trailer metadata.MD
	recvd           bool

	// A method that streams from the client (bidi), handled from its
	// HEADERS on; nil otherwise. See bidi.go.
	bidi *bidiState
}

// bufs holds buffers for request bodies and marshalled responses.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		bufs.Put(b)
	}
}

// body returns the request body received so far.
func (st *stream) body() []byte {
	if st.buf == nil {
		return nil
	}
	return *st.buf
}

// appendBody adds p to the request body, and returns its size. The
// buffer never grows past limit, the stream's window: by doubling, or
// straight to the message's size once the window covers the whole
// message.
func (st *stream) appendBody(p []byte, limit int64) int {
	if st.buf == nil {
		st.buf = getBuf()
	}
	b := *st.buf
	if need := len(b) + len(p); need > cap(b) {
		size := int64(2 * cap(b))
		if st.msgLen >= 0 && 5+st.msgLen <= limit {
			size = 5 + st.msgLen
		}
		nb := make([]byte, len(b), max(int64(need), min(size, limit)))
		copy(nb, b)
		b = nb
	}
	*st.buf = append(b, p...)
	return len(*st.buf)
}

// decoder is the function a unary handler decodes its request with. A
// worker keeps one, made once, for the calls it runs one after the
// other: a closure made for each call escaped to the heap.
type decoder struct {
	msg []byte
	dec func(v any) error // decode
}

func newDecoder() *decoder {
	d := &decoder{}
	d.dec = d.decode
	return d
}

func (d *decoder) decode(v any) error { return unmarshal(d.msg, v) }

// run calls the handler and sends its answer; d (nil: one of its own)
// decodes a unary call's request.
func (st *stream) run(d *decoder) {
	defer st.c.handlers.Done()
	var s *status.Status
	var out *[]byte
	if st.m.unary != nil {
		msg, bad := grpcMessage(st.body(), st.encoding)
		if bad != nil {
			s = bad
		} else {
			if d == nil {
				d = newDecoder()
			}
			d.msg = msg
			resp, err := st.m.unary(st.m.impl, st.Context(), d.dec, nil)
			d.msg = nil
			if err != nil {
				s = statusOf(err)
			} else if out, err = marshal(resp); err != nil {
				s = status.Newf(codes.Internal, "grpc: error while marshaling: %v", err)
			}
		}
	} else if err := st.m.stream.Handler(st.m.impl, st); err != nil {
		s = statusOf(err)
	}
	// The request is consumed: its buffer goes before finish gives its
	// credit back, and perhaps waits for room in the send queue.
	if st.bidi == nil && st.buf != nil {
		putBuf(st.buf)
		st.buf = nil
	}
	st.finish(out, s)
	if out != nil {
		putBuf(out)
	}
}

// statusOf is the status a handler's error answers with.
func statusOf(err error) *status.Status {
	if s, ok := status.FromError(err); ok {
		return s
	}
	return status.FromContextError(err)
}

// A request or response type may read or write its own wire form, without
// protobuf reflection (rls's, the RateLimitService call): the server
// decodes and encodes through these methods when a handler's type has
// them, else through proto.
type (
	wireUnmarshaler interface{ UnmarshalWire(b []byte) error }
	wireAppender    interface {
		AppendWire(b []byte) ([]byte, error)
	}
)

func unmarshal(msg []byte, v any) error {
	if u, ok := v.(wireUnmarshaler); ok {
		if err := u.UnmarshalWire(msg); err != nil {
			return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
		}
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "h2grpc: %T is not a protocol buffers message", v)
	}
	if err := proto.Unmarshal(msg, m); err != nil {
		return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return nil
}

// marshal returns v as a gRPC-framed message, in a buffer from bufs.
func marshal(v any) (*[]byte, error) {
	w, wire := v.(wireAppender)
	m, ok := v.(proto.Message)
	if !wire && !ok {
		return nil, errors.New("not a protocol buffers message")
	}
	bp := getBuf()
	b := append((*bp)[:0], 0, 0, 0, 0, 0)
	var err error
	if wire {
		b, err = w.AppendWire(b)
	} else {
		b, err = proto.MarshalOptions{}.MarshalAppend(b, m)
	}
	if err != nil {
		putBuf(bp)
		return nil, err
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	*bp = b
	return bp, nil
}

// finish gives back what the call holds of the connection's receive
// window, sends the call's end: out (a unary method's answer) then the
// status s (nil: OK), and forgets the stream.
func (st *stream) finish(out *[]byte, s *status.Status) {
	c := st.c
	c.mu.Lock()
	c.releaseRecvLocked(st)
	if !st.reset && !c.closed {
		if s == nil && out != nil {
			if !st.headersSent {
				st.sendHeadersLocked()
			}
			c.appendDataLocked(st, *out) // on failure st.reset or c.closed is set
		}
		if !st.reset && !c.closed {
			var block []byte
			switch {
			case s == nil && st.headersSent && st.trailer == nil:
				block = okTrailers
			case s == nil && !st.headersSent && st.header == nil && st.trailer == nil:
				block = append(append(block, okHeaders...), okTrailers...)
			default:
				if !st.headersSent {
					block = append(append(block, okHeaders...), appendMetadata(nil, st.header)...)
				}
				if s == nil {
					s = status.New(codes.OK, "")
				}
				block = appendStatusFields(block, s)
				block = appendMetadata(block, st.trailer)
			}
			if c.roomLocked(st, 9+len(block)) {
				c.wbuf = c.appendHeadersLocked(c.wbuf, st.id, http2.FlagHeadersEndStream, block)
				if st.bidi != nil && !st.dispatched {
					// The client is still sending: it may stop (RFC 9113
					// §8.1).
					c.wbuf = appendRST(c.wbuf, st.id, http2.ErrCodeNo)
				}
			}
		}
	}
	if st.bidi != nil {
		c.bidiStreams--
	}
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	st.reset = true
	c.running--
	c.releaseLocked()
	flush := c.startFlushLocked()
	c.mu.Unlock()
	st.ctx.cancel(context.Canceled)
	if flush {
		c.flush()
	}
}

// sendHeadersLocked appends the response headers, once there is room in
// the send queue, and reports whether it did. c.mu is held (and released
// while waiting).
func (st *stream) sendHeadersLocked() bool {
	block := okHeaders
	if st.header != nil {
		block = appendMetadata(append([]byte(nil), okHeaders...), st.header)
	}
	if !st.c.roomLocked(st, 9+len(block)) {
		return false
	}
	st.c.wbuf = st.c.appendHeadersLocked(st.c.wbuf, st.id, 0, block)
	st.headersSent = true
	return true
}

// Context returns the call's context: canceled when the client resets the
// stream, the deadline it sent (grpc-timeout) passes, or the connection
// ends.
func (st *stream) Context() context.Context {
	if st.md != nil {
		return metadata.NewIncomingContext(&st.ctx, st.md)
	}
	return &st.ctx
}

// SetHeader adds md to the response headers.
func (st *stream) SetHeader(md metadata.MD) error {
	st.c.mu.Lock()
	defer st.c.mu.Unlock()
	if st.headersSent {
		return status.Error(codes.Internal, "h2grpc: SetHeader after the headers were sent")
	}
	st.header = metadata.Join(st.header, md)
	return nil
}

// SendHeader sends the response headers, with md added.
func (st *stream) SendHeader(md metadata.MD) error {
	c := st.c
	c.mu.Lock()
	if st.headersSent {
		c.mu.Unlock()
		return status.Error(codes.Internal, "h2grpc: SendHeader called twice")
	}
	if st.reset || c.closed {
		c.mu.Unlock()
		return errStreamDone
	}
	st.header = metadata.Join(st.header, md)
	ok := st.sendHeadersLocked()
	st.stalled = false
	flush := c.startFlushLocked()
	c.mu.Unlock()
	if flush {
		c.flush()
	}
	if !ok {
		return errStreamDone
	}
	return nil
}

// SetTrailer adds md to the trailers sent with the status.
func (st *stream) SetTrailer(md metadata.MD) {
	st.c.mu.Lock()
	st.trailer = metadata.Join(st.trailer, md)
	st.c.mu.Unlock()
}

// SendMsg sends one response message, waiting for flow control as
// needed.
func (st *stream) SendMsg(m any) error {
	out, err := marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	defer putBuf(out)
	c := st.c
	c.mu.Lock()
	if st.reset || c.closed {
		c.mu.Unlock()
		return errStreamDone
	}
	if !st.headersSent {
		st.sendHeadersLocked() // on failure appendDataLocked fails too
	}
	err = c.appendDataLocked(st, *out)
	st.stalled = false
	flush := c.startFlushLocked()
	c.mu.Unlock()
	if flush {
		c.flush()
	}
	return err
}

// RecvMsg reads the request into m; a method that does not stream from
// the client takes one, so a second call returns io.EOF. On one that does
// (bidi), it waits for the client's next message.
func (st *stream) RecvMsg(m any) error {
	if st.bidi != nil {
		return st.recvNext(m)
	}
	if st.recvd {
		return io.EOF
	}
	st.recvd = true
	msg, bad := grpcMessage(st.body(), st.encoding)
	if bad != nil {
		return bad.Err()
	}
	return unmarshal(msg, m)
}
