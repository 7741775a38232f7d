package h2grpc

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/internal/transport/rawconn"
	"github.com/sluicehq/sluice/ratelimit"
)

const (
	// prefaceTimeout bounds how long a new connection may take to send the
	// client preface and its first SETTINGS.
	prefaceTimeout = 20 * time.Second
	// maxFrameSize is the largest frame the server accepts: HTTP/2's
	// default SETTINGS_MAX_FRAME_SIZE, which it does not raise.
	maxFrameSize = 16384
	// maxSendFrame bounds the DATA frames the server sends, whatever
	// SETTINGS_MAX_FRAME_SIZE the client allows.
	maxSendFrame = 64 << 10
	// closeGrace bounds the writes still pending when a connection closes.
	closeGrace = time.Second
	// yieldBelow: a flush of less than this yields once before writing.
	yieldBelow = 8 << 10
)

// connError is an HTTP/2 connection error: the connection ends with a
// GOAWAY carrying code.
type connError struct {
	code   http2.ErrCode
	reason string
}

func (e connError) Error() string { return fmt.Sprintf("http2: %v: %s", e.code, e.reason) }

func protocolError(reason string) connError { return connError{http2.ErrCodeProtocol, reason} }

// conn is one client connection. One goroutine reads its frames (serve);
// handlers append their frames to wbuf, and whoever finds no flush in
// progress writes wbuf out (a handler, or the writer goroutine for the
// frames the reader queues).
type conn struct {
	srv  *Server
	nc   net.Conn
	rw   io.ReadWriter // nc, or its socket read and written by rawconn
	br   *bufio.Reader
	kick chan struct{} // wakes the writer goroutine
	done chan struct{} // closed when the connection has ended

	// Owned by the reading goroutine.
	hdr         [9]byte
	payload     []byte
	dec         *hpack.Decoder
	req         request // the header block being decoded
	blockLen    int     // its encoded length so far
	hstream     uint32  // its stream; 0 for a late block, to decode and drop
	hid         uint32  // the stream its frames come on
	hend        bool    // its HEADERS frame had END_STREAM
	hexisting   *stream // the stream it continues (trailers), if any
	contStream  uint32  // a header block on this stream awaits CONTINUATION
	gotSettings bool
	resetTAT    int64 // the reset bound's state (GCRA)

	handlers sync.WaitGroup // dispatched handlers

	mu              sync.Mutex
	cond            *sync.Cond // send windows grew, or the connection closed
	wbuf, spare     []byte
	flushing        bool
	closeAfterFlush bool
	closed          bool // ending: frames are no longer written
	streams         map[uint32]*stream
	active          uint32 // streams open, or whose handlers run
	bidiStreams     uint32 // streams of methods that stream from the client, open
	running         uint32 // handlers running
	progress        uint64 // requests received whole, ever (MaxConnectionIdle)
	lastID          uint32 // the highest stream the client has opened
	opening         bool   // a new stream's header block is being read: counted by lastID, not yet by active (written by the reader goroutine only, under mu)
	goingAway       bool   // GOAWAY sent: no new streams
	sendWin         int64  // the connection's send window
	peerInitWin     int64  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame    int    // the client's SETTINGS_MAX_FRAME_SIZE
	tableSizeSent   bool   // the first header block (table size 0) went out
	writing         int    // the bytes of the write in progress

	// Receive flow control (see the package documentation). The client
	// may send recvWin more bytes on the connection; held bytes of
	// requests (in streams' held) and recvPending bytes consumed but not
	// yet given back make up the rest of the connection's window.
	recvWin     int64
	recvPending int64
	reserveFree int64     // the large-message reserve left to grant
	reserveQ    []*stream // streams waiting for a grant, in order

	wd watchdog // StreamLimits, under mu
}

func newConn(s *Server, nc net.Conn) *conn {
	var rw io.ReadWriter = nc
	switch tc := nc.(type) {
	case *net.TCPConn:
		rw = rawconn.Wrap(tc)
	case *limitTCPConn:
		// Closed through nc, which releases the listener's slot.
		rw = rawconn.Wrap(tc.TCPConn)
	}
	c := &conn{
		srv:          s,
		nc:           nc,
		rw:           rw,
		br:           bufio.NewReaderSize(rw, 32<<10),
		kick:         make(chan struct{}, 1),
		done:         make(chan struct{}),
		payload:      make([]byte, maxFrameSize),
		recvWin:      s.lim.connWin,
		reserveFree:  s.lim.reserve,
		streams:      map[uint32]*stream{},
		sendWin:      defaultWindow,
		peerInitWin:  defaultWindow,
		peerMaxFrame: maxFrameSize,
	}
	c.cond = sync.NewCond(&c.mu)
	c.dec = hpack.NewDecoder(4096, c.emit)
	c.dec.SetMaxStringLength(int(s.opts.MaxHeaderListSize))
	// The server's preface: its SETTINGS, and a connection window larger
	// than HTTP/2's 64 KiB.
	n := 12
	if s.lim.streamWin != defaultWindow {
		n += 6
	}
	b := appendFrameHeader(nil, n, http2.FrameSettings, 0, 0)
	b = append(b, 0, byte(http2.SettingMaxConcurrentStreams))
	b = appendUint32(b, s.opts.MaxConcurrentStreams)
	b = append(b, 0, byte(http2.SettingMaxHeaderListSize))
	b = appendUint32(b, s.opts.MaxHeaderListSize)
	if s.lim.streamWin != defaultWindow {
		b = append(b, 0, byte(http2.SettingInitialWindowSize))
		b = appendUint32(b, uint32(s.lim.streamWin))
	}
	c.wbuf = appendWindowUpdate(b, 0, s.lim.connWin-defaultWindow)
	go c.writer()
	return c
}

// emit records a decoded field. Past the header-list limit the decoder
// stops emitting until the block ends: the block is still decoded, to
// keep HPACK's table in step, but nothing of it is kept.
func (c *conn) emit(f hpack.HeaderField) {
	c.req.field(f.Name, f.Value)
	if c.req.size > c.srv.opts.MaxHeaderListSize {
		c.dec.SetEmitEnabled(false)
	}
}

func appendWindowUpdate(b []byte, id uint32, inc int64) []byte {
	b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, id)
	return appendUint32(b, uint32(inc))
}

// serve reads and handles frames until the connection ends.
func (c *conn) serve() {
	defer c.finish()
	deadline := time.Now().Add(prefaceTimeout)
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(tc, deadline) {
		return
	}
	stopTimers := c.startTimers()
	defer stopTimers()
	c.queue(nil) // the server preface
	c.nc.SetReadDeadline(deadline)
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, preface[:]); err != nil {
		c.srv.opts.Logger.Debug("h2grpc: reading the client preface", "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	if string(preface[:]) != http2.ClientPreface {
		c.fail(protocolError("bad client preface"))
		return
	}
	for {
		err := c.readFrame()
		if err == nil {
			continue
		}
		var ce connError
		if errors.As(err, &ce) {
			c.fail(ce)
		} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			c.srv.opts.Logger.Debug("h2grpc: reading", "remote", c.nc.RemoteAddr(), "err", err)
		}
		return
	}
}

// handshake runs tc's TLS handshake, bounded by deadline, and reports
// whether it negotiated "h2". Otherwise nothing is written to the
// client (the server preface queued by newConn is dropped).
func (c *conn) handshake(tc *tls.Conn, deadline time.Time) bool {
	tc.SetDeadline(deadline)
	err := tc.Handshake()
	if err == nil && tc.ConnectionState().NegotiatedProtocol != "h2" {
		err = fmt.Errorf("ALPN negotiated %q, not h2", tc.ConnectionState().NegotiatedProtocol)
	}
	if err != nil {
		c.srv.opts.Logger.Debug("h2grpc: TLS handshake", "remote", c.nc.RemoteAddr(), "err", err)
		c.mu.Lock()
		c.wbuf = c.wbuf[:0]
		c.mu.Unlock()
		return false
	}
	tc.SetWriteDeadline(time.Time{})
	return true
}

// startTimers starts the timers of MaxConnectionAge and
// MaxConnectionIdle, and returns what stops them.
func (c *conn) startTimers() (stop func()) {
	o := &c.srv.opts
	var age, idle *time.Timer
	var stopped atomic.Bool // the idle timer re-arms itself: not after stop
	if o.MaxConnectionAge > 0 {
		age = time.AfterFunc(jitter(o.MaxConnectionAge), func() {
			c.drainWith("max_age")
			if o.MaxConnectionAgeGrace <= 0 {
				return
			}
			grace := time.NewTimer(o.MaxConnectionAgeGrace)
			defer grace.Stop()
			select {
			case <-grace.C:
				c.srv.opts.Logger.Debug("h2grpc: closing a connection past its age and grace", "remote", c.nc.RemoteAddr())
				c.abort()
			case <-c.done:
			}
		})
	}
	if o.MaxConnectionIdle > 0 {
		mark := uint64(0)
		// Armed once assigned: the callback reads idle.
		idle = time.AfterFunc(time.Duration(1<<62), func() {
			c.mu.Lock()
			if c.closed || c.goingAway {
				c.mu.Unlock()
				return
			}
			if c.running == 0 && c.progress == mark {
				c.mu.Unlock()
				c.drainWith("max_idle")
				return
			}
			mark = c.progress
			c.mu.Unlock()
			if !stopped.Load() {
				idle.Reset(o.MaxConnectionIdle)
			}
		})
		idle.Reset(o.MaxConnectionIdle)
	}
	c.mu.Lock()
	c.wd.init(c.srv.lim.tick, c.onTick)
	c.mu.Unlock()
	return func() {
		stopped.Store(true)
		c.mu.Lock()
		c.wd.stopLocked()
		c.mu.Unlock()
		if age != nil {
			age.Stop()
		}
		if idle != nil {
			idle.Stop()
		}
	}
}

// jitter returns d ± 10% at random.
func jitter(d time.Duration) time.Duration {
	j := int64(d / 10)
	if j <= 0 {
		return d
	}
	return d + time.Duration(rand.Int64N(2*j+1)-j)
}

// fail ends the connection with a GOAWAY for err.
func (c *conn) fail(err connError) {
	c.srv.opts.Logger.Debug("h2grpc: connection error", "remote", c.nc.RemoteAddr(), "err", err)
	c.mu.Lock()
	c.wbuf = appendGoAway(c.wbuf, c.lastID, err.code, err.reason)
	c.closeAfterFlush = true
	c.mu.Unlock()
	c.queue(nil)
}

func appendGoAway(b []byte, last uint32, code http2.ErrCode, debug string) []byte {
	b = appendFrameHeader(b, 8+len(debug), http2.FrameGoAway, 0, 0)
	b = appendUint32(b, last)
	b = appendUint32(b, uint32(code))
	return append(b, debug...)
}

// finish ends the connection: handlers are canceled and waited for, and
// the socket is closed.
func (c *conn) finish() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	// Every stream whose handler may run is in c.streams until it ends.
	for _, st := range c.streams {
		st.ctx.cancel(context.Canceled)
	}
	c.mu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(closeGrace))
	c.handlers.Wait()
	c.mu.Lock()
	for c.flushing {
		c.cond.Wait()
	}
	// Write what is still queued (the GOAWAY of a connection error, say):
	// the writer goroutine may not have taken it up yet. The write
	// deadline bounds it.
	flush := c.startFlushLocked()
	c.mu.Unlock()
	if flush {
		c.flush()
	}
	c.nc.Close()
	close(c.done)
}

// abort closes the connection at once (Server.Stop).
func (c *conn) abort() { c.nc.Close() }

// drain sends GOAWAY: calls in flight finish, new ones are refused, and
// the connection closes when none is left (Server.GracefulStop).
func (c *conn) drain() { c.drainWith("") }

// drainWith drains with debug as the GOAWAY's debug data.
func (c *conn) drainWith(debug string) {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	c.wbuf = appendGoAway(c.wbuf, c.lastID, http2.ErrCodeNo, debug)
	// A stream the GOAWAY counts (up to lastID) is answered before the
	// close: one still being opened is, once open is done with it.
	if c.active == 0 && !c.opening {
		c.closeAfterFlush = true
	}
	c.mu.Unlock()
	c.queue(nil)
}

// queue appends frames (add may be nil) and has them written: by the
// writer goroutine, so that the caller (the reader) never blocks on the
// socket. Past MaxSendQueue and controlSlack, the client is not reading
// what it asks for, and the connection ends.
func (c *conn) queue(add func([]byte) []byte) error {
	c.mu.Lock()
	if add != nil {
		c.wbuf = add(c.wbuf)
	}
	if c.queuedLocked() > c.srv.lim.sendQueue+controlSlack {
		c.mu.Unlock()
		return connError{http2.ErrCodeEnhanceYourCalm, "the client does not read what it asked for"}
	}
	if !c.flushing {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return nil
}

// queuedLocked returns the bytes of frames queued or being written.
func (c *conn) queuedLocked() int { return len(c.wbuf) + c.writing }

// kickLocked has the writer goroutine write what is queued, unless a
// flush is under way. c.mu is held.
func (c *conn) kickLocked() {
	if !c.flushing && len(c.wbuf) > 0 {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// roomLocked waits until n more bytes of a handler's frames fit in the
// send queue (MaxSendQueue; any frame fits in an empty queue), and
// reports whether st may still write. c.mu is held (and released while
// waiting).
func (c *conn) roomLocked(st *stream, n int) bool {
	for !st.reset && !c.closed {
		if q := c.queuedLocked(); q == 0 || q+n <= c.srv.lim.sendQueue {
			return true
		}
		c.kickLocked()
		c.waitForClientLocked(st)
	}
	return false
}

// waitForClientLocked waits for the client to make room for st's answer:
// window, or room in the send queue. The watchdog ends the connection
// once one write of st's has waited WriteTimeout. c.mu is held (and
// released while waiting).
func (c *conn) waitForClientLocked(st *stream) {
	if !st.stalled {
		st.stalled = true
		st.stallSince = c.wd.tick
		c.wd.armLocked(c.closed)
	}
	c.cond.Wait()
}

// writer flushes what the reader queues.
func (c *conn) writer() {
	for {
		select {
		case <-c.kick:
			c.mu.Lock()
			if c.flushing {
				c.mu.Unlock()
				continue
			}
			c.flushing = true
			c.mu.Unlock()
			c.flush()
		case <-c.done:
			return
		}
	}
}

// startFlushLocked reports whether the caller is to flush: frames wait
// and nobody is writing them. c.mu is held.
func (c *conn) startFlushLocked() bool {
	if c.flushing || len(c.wbuf) == 0 {
		return false
	}
	c.flushing = true
	return true
}

// flush writes wbuf out until it stays empty. The caller has set
// c.flushing.
func (c *conn) flush() {
	c.mu.Lock()
	if len(c.wbuf) < yieldBelow {
		// Let the handlers that are ready to answer add their frames
		// first: one write for many answers costs little more than one.
		// In bench/rls this halved the server's CPU per call (16.9 to 9.4
		// µs on the memory store) and the load generator's.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	for len(c.wbuf) > 0 {
		b := c.wbuf
		c.wbuf, c.spare = c.spare[:0], nil
		c.writing = len(b)
		c.wd.armLocked(c.closed)
		c.mu.Unlock()
		_, err := c.rw.Write(b)
		c.mu.Lock()
		c.writing = 0
		c.wd.writes++
		c.cond.Broadcast() // handlers may wait for room in the queue
		if cap(b) <= 256<<10 {
			c.spare = b[:0]
		}
		if err != nil {
			c.wbuf = c.wbuf[:0]
			c.closed = true
			c.nc.Close()
			break
		}
	}
	c.flushing = false
	if c.closeAfterFlush {
		c.nc.Close()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// readFrame reads one frame and handles it.
func (c *conn) readFrame() error {
	if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
		return err
	}
	length := int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
	typ, flags := http2.FrameType(c.hdr[3]), http2.Flags(c.hdr[4])
	id := binary.BigEndian.Uint32(c.hdr[5:]) & (1<<31 - 1)
	if length > maxFrameSize {
		return connError{http2.ErrCodeFrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE"}
	}
	p := c.payload[:length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return err
	}
	if !c.gotSettings {
		if typ != http2.FrameSettings || flags.Has(http2.FlagSettingsAck) {
			return protocolError("the client preface's first frame is not SETTINGS")
		}
		c.gotSettings = true
		c.nc.SetReadDeadline(time.Time{})
	}
	if c.contStream != 0 && (typ != http2.FrameContinuation || id != c.contStream) {
		return protocolError("a header block was interrupted")
	}
	switch typ {
	case http2.FrameData:
		return c.onData(flags, id, p)
	case http2.FrameHeaders:
		return c.onHeaders(flags, id, p)
	case http2.FrameContinuation:
		if c.contStream == 0 {
			return protocolError("CONTINUATION without a header block")
		}
		return c.onFragment(flags.Has(http2.FlagContinuationEndHeaders), p)
	case http2.FramePriority:
		if id == 0 {
			return protocolError("PRIORITY on stream 0")
		}
		if length != 5 {
			return c.resetID(id, http2.ErrCodeFrameSize)
		}
		return nil
	case http2.FrameRSTStream:
		return c.onReset(id, p)
	case http2.FrameSettings:
		return c.onSettings(flags, id, p)
	case http2.FramePushPromise:
		return protocolError("PUSH_PROMISE from a client")
	case http2.FramePing:
		if id != 0 {
			return protocolError("PING on a stream")
		}
		if length != 8 {
			return connError{http2.ErrCodeFrameSize, "PING of other than 8 bytes"}
		}
		if flags.Has(http2.FlagPingAck) {
			return nil
		}
		return c.queue(func(b []byte) []byte {
			b = appendFrameHeader(b, 8, http2.FramePing, http2.FlagPingAck, 0)
			return append(b, p...)
		})
	case http2.FrameGoAway:
		if id != 0 {
			return protocolError("GOAWAY on a stream")
		}
		if length < 8 {
			return connError{http2.ErrCodeFrameSize, "GOAWAY shorter than 8 bytes"}
		}
		return nil // the client closes the connection when it is done
	case http2.FrameWindowUpdate:
		return c.onWindowUpdate(id, p)
	}
	return nil // extension frames are ignored (RFC 9113 §5.5)
}

// stripPadding removes a PADDED frame's padding.
func stripPadding(flags http2.Flags, p []byte) ([]byte, error) {
	if !flags.Has(http2.FlagDataPadded) { // the same bit as HEADERS' PADDED
		return p, nil
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, protocolError("padding as long as the frame")
	}
	return p[1 : len(p)-int(p[0])], nil
}

func (c *conn) stream(id uint32) *stream {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	return st
}

// closedID reports whether id names a stream the client opened before:
// frames on it are late, not a protocol violation.
func (c *conn) closedID(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id <= c.lastID
}

func (c *conn) onHeaders(flags http2.Flags, id uint32, p []byte) error {
	if id == 0 || id%2 == 0 {
		return protocolError("HEADERS on a stream a client may not open")
	}
	p, err := stripPadding(flags, p)
	if err != nil {
		return err
	}
	if flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return protocolError("HEADERS too short for its priority")
		}
		p = p[5:]
	}
	c.req = request{keep: c.srv.opts.Metadata}
	c.blockLen = 0
	c.dec.SetEmitEnabled(true)
	c.hstream, c.hid, c.hend = id, id, flags.Has(http2.FlagHeadersEndStream)
	c.hexisting = c.stream(id)
	if c.hexisting == nil && !c.closedID(id) {
		c.mu.Lock()
		c.lastID, c.opening = id, true
		c.mu.Unlock()
	} else if c.hexisting == nil {
		// A late block on a closed stream: decoded, to keep HPACK's table
		// in step, then dropped. The server does not remember which
		// closed streams it reset, after which the client may still send
		// (RFC 9113 §5.1 "closed"), so it treats every closed stream so.
		c.hstream = 0
	}
	return c.onFragment(flags.Has(http2.FlagHeadersEndHeaders), p)
}

// onFragment decodes a piece of a header block; at its end it acts on the
// block.
func (c *conn) onFragment(end bool, p []byte) error {
	c.blockLen += len(p)
	if c.blockLen > 4*int(c.srv.opts.MaxHeaderListSize) {
		return connError{http2.ErrCodeEnhanceYourCalm, "header block too large"}
	}
	if _, err := c.dec.Write(p); err != nil {
		return connError{http2.ErrCodeCompression, err.Error()}
	}
	if !end {
		// The CONTINUATIONs come on the block's stream, a late block's too.
		c.contStream = c.hid
		return nil
	}
	c.contStream = 0
	if err := c.dec.Close(); err != nil {
		return connError{http2.ErrCodeCompression, err.Error()}
	}
	if c.hstream == 0 {
		return nil
	}
	if st := c.hexisting; st != nil {
		// Trailers from the client end its request.
		if st.dispatched {
			return c.reset(st, http2.ErrCodeStreamClosed)
		}
		// Trailers end the stream and carry no pseudo-headers (RFC 9113
		// §8.1).
		if !c.hend || c.req.pseudo != 0 || c.req.malformed != "" {
			return c.reset(st, http2.ErrCodeProtocol)
		}
		if c.req.size > c.srv.opts.MaxHeaderListSize && st.bidi != nil {
			// Its handler may have answered already: no status can follow.
			return c.reset(st, http2.ErrCodeProtocol)
		}
		if c.req.size > c.srv.opts.MaxHeaderListSize {
			c.drop(st)
			return c.reject(st.id, true, 200, status.Newf(codes.ResourceExhausted,
				"h2grpc: trailers of %d bytes are larger than %d", c.req.size, c.srv.opts.MaxHeaderListSize))
		}
		return c.endRequest(st)
	}
	return c.open(c.hstream, c.hend)
}

// open starts a call on stream id from the request c.req.
func (c *conn) open(id uint32, end bool) error {
	defer c.opened()
	r := &c.req
	opts := &c.srv.opts
	c.mu.Lock()
	refuse := c.goingAway || c.active >= opts.MaxConcurrentStreams
	c.mu.Unlock()
	if refuse {
		return c.resetID(id, http2.ErrCodeRefusedStream)
	}
	// First: past the limit the decoder stopped emitting, so the fields
	// after it were neither kept nor checked.
	if r.size > opts.MaxHeaderListSize {
		return c.reject(id, end, 200, status.Newf(codes.ResourceExhausted,
			"h2grpc: header list of %d bytes is larger than %d", r.size, opts.MaxHeaderListSize))
	}
	if r.malformed != "" || !r.scheme || r.method == "" || r.path == "" {
		return c.resetID(id, http2.ErrCodeProtocol)
	}
	if r.method != "POST" {
		return c.reject(id, end, 405, status.Newf(codes.Internal, "h2grpc: method %q is not POST", r.method))
	}
	if !grpcContentType(r.contentType) {
		return c.reject(id, end, 415, status.Newf(codes.Internal, "h2grpc: invalid gRPC request content-type %q", r.contentType))
	}
	m := c.srv.methods[r.path]
	switch {
	case m == nil:
		return c.reject(id, end, 200, status.Newf(codes.Unimplemented, "unknown method %s", r.path))
	case r.badTimeout:
		return c.reject(id, end, 200, status.New(codes.Internal, "h2grpc: malformed grpc-timeout"))
	case r.encoding != "" && r.encoding != "identity":
		return c.reject(id, end, 200, status.Newf(codes.Unimplemented, "h2grpc: no decompressor for grpc-encoding %q", r.encoding))
	case m.stream != nil && m.stream.ClientStreams:
		return c.openBidi(id, end, m, r)
	}
	st := c.addStream(id, m, r, nil)
	if end {
		return c.endRequest(st)
	}
	return nil
}

// opened ends the opening of a stream that open refused (addStream ends
// it for one it counts), and closes a draining connection left with
// nothing to answer, after the refusal open queued is written. Only the
// reader goroutine writes c.opening, so it reads it here without c.mu:
// an opened call takes no lock.
func (c *conn) opened() {
	if !c.opening {
		return
	}
	c.mu.Lock()
	c.opening = false
	c.closeIfDrainedLocked()
	c.mu.Unlock()
}

// addStream makes the stream of a call of m on id, as r asks, and counts
// it open; bidi, for a method that streams from the client, also counts
// its handler as running.
func (c *conn) addStream(id uint32, m *method, r *request, bidi *bidiState) *stream {
	st := &stream{c: c, id: id, m: m, recvLimit: c.srv.lim.streamWin, msgLen: -1, encoding: r.encoding, md: r.md, bidi: bidi}
	if r.hasTimeout {
		st.ctx.setTimeout(r.timeout)
	}
	c.mu.Lock()
	st.sendWin = c.peerInitWin
	st.since = c.wd.tick
	c.streams[id] = st
	c.active++
	c.opening = false
	if bidi != nil {
		c.bidiStreams++
		c.running++
	}
	c.wd.armLocked(c.closed)
	c.mu.Unlock()
	return st
}

// reject answers a call the server will not run with its status alone
// (and the HTTP status code, for requests that are not gRPC), and resets
// the stream if the client is still sending.
func (c *conn) reject(id uint32, end bool, code int, s *status.Status) error {
	return c.queue(func(b []byte) []byte {
		var block []byte
		if code == 200 {
			block = append(block, okHeaders...)
		} else {
			block = append(block, 0x08) // :status, as a literal without indexing
			block = appendString(block, fmt.Sprint(code))
			block = appendLiteralIndexed(block, hpackContentType, "application/grpc")
		}
		block = appendStatusFields(block, s)
		b = c.appendHeadersLocked(b, id, http2.FlagHeadersEndStream, block)
		if !end {
			b = appendRST(b, id, http2.ErrCodeNo)
		}
		return b
	})
}

func appendRST(b []byte, id uint32, code http2.ErrCode) []byte {
	b = appendFrameHeader(b, 4, http2.FrameRSTStream, 0, id)
	return appendUint32(b, uint32(code))
}

// resetID resets a stream the server keeps no state for. A reset other
// than a refusal is the client's doing, and counts against its bound.
func (c *conn) resetID(id uint32, code http2.ErrCode) error {
	if code != http2.ErrCodeRefusedStream {
		if err := c.countReset(); err != nil {
			return err
		}
	}
	return c.queue(func(b []byte) []byte { return appendRST(b, id, code) })
}

// countReset charges one stream reset against the client's bound
// (StreamLimits.ResetRate and ResetBurst, as a GCRA bucket): past it, the
// connection ends. Called by the reading goroutine.
func (c *conn) countReset() error {
	lim := &c.srv.lim
	if !lim.boundResets {
		return nil
	}
	var d ratelimit.Decision
	c.resetTAT = gcra.StepCost(c.resetTAT, time.Now().UnixNano(), 1, false, 0, &lim.resets, &d)
	if !d.Allowed {
		return connError{http2.ErrCodeEnhanceYourCalm, "too many streams reset"}
	}
	return nil
}

// reset resets st: its handler, if running, is canceled and its frames
// dropped.
func (c *conn) reset(st *stream, code http2.ErrCode) error {
	c.drop(st)
	return c.resetID(st.id, code)
}

// drop forgets st, as the client or the server reset it. Called by the
// reading goroutine: a stream whose handler has not been dispatched gives
// back what it holds at once; one whose handler runs, when it returns.
func (c *conn) drop(st *stream) {
	c.mu.Lock()
	free := false
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
		st.reset = true
		if !st.dispatched && st.bidi == nil {
			c.releaseLocked()
			c.releaseRecvLocked(st)
			c.kickLocked()
			free = true
		}
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	st.ctx.cancel(context.Canceled)
	if free && st.buf != nil {
		putBuf(st.buf)
		st.buf = nil
	}
}

// releaseRecvLocked gives back what st holds of the connection's receive
// window: its request's bytes (WINDOW_UPDATE, once enough are due) and
// its grant from the large-message reserve, which goes to the streams
// waiting for it. c.mu is held; the caller has the frames written.
func (c *conn) releaseRecvLocked(st *stream) {
	if st.released {
		return
	}
	st.released = true
	c.unwaitLocked(st)
	c.giveBackLocked(st.held)
	st.held = 0
	if st.grant > 0 {
		c.reserveFree += st.grant
		st.grant = 0
		c.grantWaitingLocked()
	}
}

// giveBackLocked counts n bytes of the connection's window as consumed,
// and gives the client its credit back once windowUpdateAt bytes are due.
// c.mu is held; the caller has the frames written.
func (c *conn) giveBackLocked(n int64) {
	if c.recvPending += n; c.recvPending >= windowUpdateAt && !c.closed {
		c.wbuf = appendWindowUpdate(c.wbuf, 0, c.recvPending)
		c.recvWin += c.recvPending
		c.recvPending = 0
	}
}

// wantGrantLocked asks for the credit st needs to send the rest of its
// request message: granted at once from the reserve if no stream waits
// before it, else when enough is given back. c.mu is held; the caller has
// the frames written.
func (c *conn) wantGrantLocked(st *stream, need int64) {
	st.need = need
	if len(c.reserveQ) == 0 && need <= c.reserveFree {
		c.grantLocked(st)
		return
	}
	c.reserveQ = append(c.reserveQ, st)
}

func (c *conn) grantLocked(st *stream) {
	c.reserveFree -= st.need
	st.grant += st.need
	st.recvLimit += st.need
	c.wbuf = appendWindowUpdate(c.wbuf, st.id, st.need)
	st.need = 0
}

// grantWaitingLocked grants the waiting streams what the reserve has, in
// order. c.mu is held.
func (c *conn) grantWaitingLocked() {
	for len(c.reserveQ) > 0 && c.reserveQ[0].need <= c.reserveFree {
		c.grantLocked(c.reserveQ[0])
		c.reserveQ = c.reserveQ[1:]
	}
	if len(c.reserveQ) == 0 {
		c.reserveQ = nil
	}
}

// unwaitLocked takes st out of the streams waiting for a grant. c.mu is
// held.
func (c *conn) unwaitLocked(st *stream) {
	if st.need == 0 {
		return
	}
	st.need = 0
	for i, w := range c.reserveQ {
		if w == st {
			c.reserveQ = append(c.reserveQ[:i], c.reserveQ[i+1:]...)
			break
		}
	}
	if len(c.reserveQ) == 0 {
		c.reserveQ = nil
	}
	// The stream at the head may fit now.
	c.grantWaitingLocked()
}

// releaseLocked counts a stream as no longer active, and closes a
// draining connection that has none left. c.mu is held.
func (c *conn) releaseLocked() {
	c.active--
	c.closeIfDrainedLocked()
}

// closeIfDrainedLocked closes a draining connection with no stream left
// and none being opened, once what is queued is written. c.mu is held.
func (c *conn) closeIfDrainedLocked() {
	if c.goingAway && c.active == 0 && !c.opening {
		c.closeAfterFlush = true
		if !c.flushing {
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
	}
}

// endRequest runs st's handler: the client has sent all of its request.
func (c *conn) endRequest(st *stream) error {
	if st.bidi != nil {
		return c.onBidiData(st, nil, true)
	}
	c.mu.Lock()
	st.dispatched = true
	c.running++
	c.progress++
	if st.need > 0 {
		// The message is cut short: it needs no more credit.
		c.unwaitLocked(st)
		c.kickLocked()
	}
	c.mu.Unlock()
	c.handlers.Add(1)
	c.srv.dispatch(st)
	return nil
}

// onData takes a DATA frame: its bytes count against the connection's
// window and the stream's, and stay counted until the call's handler has
// returned (a stream's request is one message, read whole before the
// handler runs). Padding, and data the server drops, are given back at
// once.
func (c *conn) onData(flags http2.Flags, id uint32, p []byte) error {
	if id == 0 {
		return protocolError("DATA on stream 0")
	}
	data, err := stripPadding(flags, p)
	if err != nil {
		return err
	}
	end := flags.Has(http2.FlagDataEndStream)
	st, limit, err := c.takeData(id, int64(len(p)), int64(len(data)), end)
	if st == nil || err != nil {
		return err
	}
	if st.bidi != nil {
		return c.onBidiData(st, data, end)
	}
	size := st.appendBody(data, limit)
	max := c.srv.opts.MaxRecvMsgSize
	if st.msgLen < 0 && size >= 5 {
		declared := int64(binary.BigEndian.Uint32(st.body()[1:5]))
		if declared > int64(max) {
			c.drop(st)
			return c.reject(id, end, 200, status.Newf(codes.ResourceExhausted,
				"grpc: received message larger than max (%d vs. %d)", declared, max))
		}
		st.msgLen = declared
		if !end {
			// The credit for the rest of the message, past the stream's
			// window.
			c.mu.Lock()
			if need := (5 + declared - int64(size)) - (st.recvLimit - st.recvBytes); need > 0 {
				c.wantGrantLocked(st, need)
				c.kickLocked()
			}
			c.mu.Unlock()
		}
	}
	if st.msgLen >= 0 && int64(size) > 5+st.msgLen {
		// A method takes one message: a second gets no credit, so the
		// call ends here rather than waiting for it.
		c.drop(st)
		return c.reject(id, end, 200, status.New(codes.Internal, "h2grpc: more than one request message for a method that takes one"))
	}
	if end {
		return c.endRequest(st)
	}
	return nil
}

// takeData counts a DATA frame of n bytes, of which dataLen are data
// (the rest padding), against the windows, and returns the stream whose
// request the data is for and its receive window; no stream for data
// the server drops (late, or after the request's end).
func (c *conn) takeData(id uint32, n, dataLen int64, end bool) (*stream, int64, error) {
	c.mu.Lock()
	if c.recvWin -= n; c.recvWin < 0 {
		c.mu.Unlock()
		return nil, 0, connError{http2.ErrCodeFlowControl, "DATA beyond the connection's window"}
	}
	st := c.streams[id]
	if st != nil && st.bidi != nil && st.bidi.err != nil && !st.dispatched {
		// The rest of a bidi stream the server ends (its message was too
		// large): dropped.
		st = nil
	}
	if st == nil || st.dispatched {
		// Late data on a stream already answered or reset, or data after
		// the request's end.
		c.giveBackLocked(n)
		c.kickLocked()
		opened := id <= c.lastID
		c.mu.Unlock()
		switch {
		case st != nil:
			return nil, 0, c.reset(st, http2.ErrCodeStreamClosed)
		case !opened:
			return nil, 0, protocolError("DATA on a stream not opened")
		}
		return nil, 0, nil
	}
	if st.recvBytes += n; st.recvBytes > st.recvLimit {
		c.mu.Unlock()
		return nil, 0, connError{http2.ErrCodeFlowControl, "DATA beyond the stream's window"}
	}
	st.held += dataLen
	if pad := n - dataLen; pad > 0 {
		// Padding is consumed on arrival, on the stream too: the credit a
		// stream is granted is for its message.
		c.giveBackLocked(pad)
		if !end {
			st.recvLimit += pad
			c.wbuf = appendWindowUpdate(c.wbuf, id, pad)
		}
		c.kickLocked()
	}
	limit := st.recvLimit
	c.mu.Unlock()
	return st, limit, nil
}

func (c *conn) onReset(id uint32, p []byte) error {
	if id == 0 {
		return protocolError("RST_STREAM on stream 0")
	}
	if len(p) != 4 {
		return connError{http2.ErrCodeFrameSize, "RST_STREAM of other than 4 bytes"}
	}
	if st := c.stream(id); st != nil {
		c.drop(st)
		return c.countReset()
	}
	if !c.closedID(id) {
		return protocolError("RST_STREAM on a stream not opened")
	}
	return nil
}

func (c *conn) onSettings(flags http2.Flags, id uint32, p []byte) error {
	if id != 0 {
		return protocolError("SETTINGS on a stream")
	}
	if flags.Has(http2.FlagSettingsAck) {
		if len(p) != 0 {
			return connError{http2.ErrCodeFrameSize, "SETTINGS acknowledgement with a payload"}
		}
		return nil
	}
	if len(p)%6 != 0 {
		return connError{http2.ErrCodeFrameSize, "SETTINGS of a length not a multiple of 6"}
	}
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:6])
		switch http2.SettingID(binary.BigEndian.Uint16(p[:2])) {
		case http2.SettingEnablePush:
			if v > 1 {
				return protocolError("SETTINGS_ENABLE_PUSH other than 0 or 1")
			}
		case http2.SettingInitialWindowSize:
			if v > maxWindow {
				return connError{http2.ErrCodeFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"}
			}
			c.mu.Lock()
			delta := int64(v) - c.peerInitWin
			c.peerInitWin = int64(v)
			overflow := false
			for _, st := range c.streams {
				if st.sendWin += delta; st.sendWin > maxWindow {
					overflow = true
				}
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			if overflow {
				return connError{http2.ErrCodeFlowControl, "a stream's window above 2^31-1"}
			}
		case http2.SettingMaxFrameSize:
			if v < 16384 || v > 1<<24-1 {
				return protocolError("SETTINGS_MAX_FRAME_SIZE out of range")
			}
			c.mu.Lock()
			c.peerMaxFrame = int(v)
			c.mu.Unlock()
		}
		// SETTINGS_HEADER_TABLE_SIZE needs nothing: the server's encoder
		// keeps no dynamic table. The others concern what a server does not
		// receive (push) or are advisory.
	}
	return c.queue(func(b []byte) []byte {
		return appendFrameHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
	})
}

func (c *conn) onWindowUpdate(id uint32, p []byte) error {
	if len(p) != 4 {
		return connError{http2.ErrCodeFrameSize, "WINDOW_UPDATE of other than 4 bytes"}
	}
	inc := int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
	if id == 0 {
		if inc == 0 {
			return protocolError("WINDOW_UPDATE of 0")
		}
		if c.growWindow(&c.sendWin, inc) {
			return connError{http2.ErrCodeFlowControl, "the connection's window above 2^31-1"}
		}
		return nil
	}
	st := c.stream(id)
	if st == nil {
		if c.closedID(id) {
			return nil
		}
		return protocolError("WINDOW_UPDATE on a stream not opened")
	}
	if inc == 0 {
		return c.reset(st, http2.ErrCodeProtocol)
	}
	if c.growWindow(&st.sendWin, inc) {
		return c.reset(st, http2.ErrCodeFlowControl)
	}
	return nil
}

// growWindow adds inc to a send window (the connection's or a stream's,
// both under c.mu), wakes the writers waiting for room, and reports
// whether the window went above 2^31-1 (RFC 9113 §6.9.1).
func (c *conn) growWindow(win *int64, inc int64) (over bool) {
	c.mu.Lock()
	*win += inc
	over = *win > maxWindow
	c.cond.Broadcast()
	c.mu.Unlock()
	return over
}

// appendHeadersLocked appends a header block for stream id as HEADERS
// and, past the client's frame size, CONTINUATION frames. c.mu is held.
func (c *conn) appendHeadersLocked(b []byte, id uint32, flags http2.Flags, block []byte) []byte {
	if !c.tableSizeSent {
		c.tableSizeSent = true
		block = append([]byte{hpackTableSizeOff}, block...)
	}
	typ := http2.FrameHeaders
	for {
		n := min(len(block), c.peerMaxFrame)
		f := flags
		if n == len(block) {
			f |= http2.FlagHeadersEndHeaders
		}
		b = appendFrameHeader(b, n, typ, f, id)
		b = append(b, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return b
		}
		typ, flags = http2.FrameContinuation, 0
	}
}

// errStreamDone is what writes on a stream that has ended return.
var errStreamDone = status.Error(codes.Canceled, "h2grpc: the stream has ended")

// appendDataLocked appends data as DATA frames on st, waiting for flow
// control and for room in the send queue as needed. c.mu is held (and
// released while waiting).
func (c *conn) appendDataLocked(st *stream, data []byte) error {
	for len(data) > 0 {
		var n int64
		for {
			if st.reset || c.closed {
				return errStreamDone
			}
			if c.sendWin > 0 && st.sendWin > 0 {
				n = min(int64(len(data)), int64(min(c.peerMaxFrame, maxSendFrame)), c.sendWin, st.sendWin)
				if q := c.queuedLocked(); q == 0 || q+9+int(n) <= c.srv.lim.sendQueue {
					break
				}
			}
			// The client may be waiting for what is queued before it
			// grants more; or the queue is full.
			c.kickLocked()
			c.waitForClientLocked(st)
		}
		c.wbuf = appendFrameHeader(c.wbuf, int(n), http2.FrameData, 0, st.id)
		c.wbuf = append(c.wbuf, data[:n]...)
		c.sendWin -= n
		st.sendWin -= n
		data = data[n:]
	}
	return nil
}

// grpcMessage returns the gRPC message framed in b, a call's whole
// request body.
func grpcMessage(b []byte, encoding string) ([]byte, *status.Status) {
	if len(b) < 5 {
		return nil, status.New(codes.Internal, "h2grpc: the request has no message")
	}
	n := binary.BigEndian.Uint32(b[1:5])
	if uint64(len(b)-5) != uint64(n) {
		if uint64(len(b)-5) < uint64(n) {
			return nil, status.New(codes.Internal, "h2grpc: the request's message is truncated")
		}
		return nil, status.New(codes.Internal, "h2grpc: more than one request message for a method that takes one")
	}
	switch b[0] {
	case 0:
	case 1:
		if encoding == "" || encoding == "identity" {
			return nil, status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		}
	default:
		return nil, status.Newf(codes.Internal, "grpc: invalid compressed flag %d", b[0])
	}
	return b[5:], nil
}
