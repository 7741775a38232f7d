package h2grpc

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

// Guard returns creds whose connections are held to o's StreamLimits and
// MaxConnectionIdle as the Server's are, for grpc-go's server
// (grpc.Creds(Guard(creds, o))), which has no such bounds: a stream whose
// request never ends and one whose answer waits on a zero window keep
// its connection busy for good, and its rapid-reset defence bounds the
// handlers running, not the resets. After creds' handshake, the
// connection's frames are read as they pass, both ways (the client's
// HEADERS, DATA, RST_STREAM, SETTINGS and WINDOW_UPDATE; the server's
// DATA, trailers and RST_STREAM), which tells which streams wait on
// whom and what the client's windows are. A connection that breaks a
// bound gets a GOAWAY (written between two of grpc-go's frames) and is
// closed, as on the Server:
//
//   - a stream whose request has not ended within RequestTimeout;
//   - a stream whose request has ended and whose window, or the
//     connection's, has stayed at 0 or less for WriteTimeout while
//     grpc-go has not ended it;
//   - a write to the socket under way for WriteTimeout (closed at once);
//   - RST_STREAM from the client on streams grpc-go has not ended, past
//     ResetRate a second and ResetBurst at once (ENHANCE_YOUR_CALM);
//   - with MaxConnectionIdle, streams open but none with a request whole
//     and unanswered, and no request received whole, for
//     MaxConnectionIdle ("max_idle"; grpc-go's own keepalive
//     MaxConnectionIdle ends connections with no stream).
//
// It is for services whose methods take one request message (unary and
// server-streaming, as the Server serves): a client-streaming call that
// keeps its side open past RequestTimeout would end its connection. The
// other fields of o do not apply: grpc-go's server has its own
// (rls.ServerOptions).
func Guard(creds credentials.TransportCredentials, o Options) credentials.TransportCredentials {
	o = o.withDefaults()
	g := &guard{TransportCredentials: creds, opts: o, lim: o.StreamLimits.ticks()}
	if g.lim.tick > 0 && o.MaxConnectionIdle > 0 {
		g.idleTicks = uint32(min((o.MaxConnectionIdle+g.lim.tick-1)/g.lim.tick, 1<<30))
	}
	return g
}

type guard struct {
	credentials.TransportCredentials
	opts      Options
	lim       ticks
	idleTicks uint32 // MaxConnectionIdle in ticks; 0: none
}

func (g *guard) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := g.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nc, info, err
	}
	return newGuardConn(g, nc), info, nil
}

func (g *guard) Clone() credentials.TransportCredentials {
	c := *g
	c.TransportCredentials = g.TransportCredentials.Clone()
	return &c
}

// ClientHandshake passes through: the guard is for servers.
func (g *guard) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return g.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

// guardConn is a connection of grpc-go's server, watched.
type guardConn struct {
	net.Conn
	g *guard

	wmu sync.Mutex // writes, and the GOAWAY written between them
	wr  frameScanner

	mu          sync.Mutex
	rd          frameScanner           // the reading goroutine's, fed under mu
	streams     map[uint32]guardStream // by value: no allocation a stream
	lastID      uint32
	peerInitWin int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	connWin     int64 // the connection's send window
	resetTAT    int64
	ended       bool   // closed
	goaway      []byte // the GOAWAY to write before closing, once ending

	wd           watchdog
	progressTick uint32 // the tick of the last request received whole
	writing      bool
}

type guardStream struct {
	since      uint32 // the tick it opened
	ended      bool   // the client's request has ended
	win        int64  // its send window
	stalled    bool   // its answer is due and its window is spent
	stallSince uint32
}

func newGuardConn(g *guard, nc net.Conn) *guardConn {
	c := &guardConn{Conn: nc, g: g, streams: map[uint32]guardStream{}, peerInitWin: defaultWindow, connWin: defaultWindow}
	c.rd.skip = len(http2.ClientPreface)
	c.wd.init(g.lim.tick, c.onTick)
	return c
}

// Read hands grpc-go what the client sent, up to the frame that breaks
// the reset bound: what follows it is not read.
func (c *guardConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	ending := c.goaway != nil
	c.mu.Unlock()
	if ending {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		n = c.rd.feed(p[:n], c.onClientFrame)
		breach := c.rd.stopped
		c.mu.Unlock()
		if breach {
			c.end(http2.ErrCodeEnhanceYourCalm, "too many streams reset")
		}
	}
	return n, err
}

func (c *guardConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.writing = true
	c.wd.armLocked(c.ended)
	c.mu.Unlock()
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.writing = false
	c.wd.writes++
	c.wr.feed(p[:n], func(h frameHeader, _ []byte) bool { c.onServerFrame(h); return false })
	ending := c.goaway != nil
	c.mu.Unlock()
	if ending {
		// The GOAWAY goes between two of grpc-go's frames.
		c.goAwayLocked()
	}
	return n, err
}

// Close closes the connection, after the GOAWAY if it is ending and the
// bytes written so far end with a whole frame.
func (c *guardConn) Close() error {
	c.mu.Lock()
	ending := c.goaway != nil && !c.ended
	c.mu.Unlock()
	if ending {
		// grpc-go's write under way returns within closeGrace.
		c.Conn.SetWriteDeadline(time.Now().Add(closeGrace))
		c.wmu.Lock()
		c.goAwayLocked()
		c.wmu.Unlock()
	}
	return c.close()
}

func (c *guardConn) close() error {
	c.mu.Lock()
	c.ended = true
	c.wd.stopLocked()
	c.mu.Unlock()
	return c.Conn.Close()
}

// goAwayLocked writes the GOAWAY, if the connection is ending and the
// bytes written so far end with a whole frame, and closes the
// connection. c.wmu is held.
func (c *guardConn) goAwayLocked() {
	c.mu.Lock()
	b := c.goaway
	if b == nil || c.ended || !c.wr.atBoundary() {
		c.mu.Unlock()
		return
	}
	c.ended = true
	c.mu.Unlock()
	c.Conn.SetWriteDeadline(time.Now().Add(closeGrace))
	c.Conn.Write(b)
	c.close()
}

// onClientFrame follows a frame from the client, and reports whether it
// resets a stream past the bound. c.mu is held.
func (c *guardConn) onClientFrame(h frameHeader, payload []byte) (breach bool) {
	if c.goaway != nil {
		return true
	}
	switch h.typ {
	case http2.FrameHeaders:
		st, ok := c.streams[h.id]
		if !ok && h.id > c.lastID && h.id%2 == 1 {
			c.lastID = h.id
			st, ok = guardStream{since: c.wd.tick, win: c.peerInitWin}, true
			c.wd.armLocked(c.ended)
		}
		if ok {
			if h.flags.Has(http2.FlagHeadersEndStream) {
				st.ended = true
				c.progressTick = c.wd.tick
			}
			c.streams[h.id] = st
		}
	case http2.FrameData:
		if st, ok := c.streams[h.id]; ok && h.flags.Has(http2.FlagDataEndStream) {
			st.ended = true
			c.progressTick = c.wd.tick
			c.streams[h.id] = st
		}
	case http2.FrameRSTStream:
		if _, ok := c.streams[h.id]; !ok {
			return false
		}
		delete(c.streams, h.id)
		if !c.g.lim.boundResets {
			return false
		}
		var d ratelimit.Decision
		c.resetTAT = gcra.StepCost(c.resetTAT, time.Now().UnixNano(), 1, false, 0, &c.g.lim.resets, &d)
		return !d.Allowed
	case http2.FrameSettings:
		for p := payload; len(p) >= 6 && !h.flags.Has(http2.FlagSettingsAck); p = p[6:] {
			if http2.SettingID(binary.BigEndian.Uint16(p)) == http2.SettingInitialWindowSize {
				v := int64(binary.BigEndian.Uint32(p[2:]))
				for id, st := range c.streams {
					st.win += v - c.peerInitWin
					c.streams[id] = st
				}
				c.peerInitWin = v
			}
		}
	case http2.FrameWindowUpdate:
		if len(payload) != 4 {
			return false
		}
		inc := int64(binary.BigEndian.Uint32(payload) & (1<<31 - 1))
		if h.id == 0 {
			c.connWin += inc
		} else if st, ok := c.streams[h.id]; ok {
			st.win += inc
			c.streams[h.id] = st
		}
	}
	return false
}

// onServerFrame follows a frame from grpc-go's server. c.mu is held.
func (c *guardConn) onServerFrame(h frameHeader) {
	switch h.typ {
	case http2.FrameData:
		c.connWin -= int64(h.length)
		if st, ok := c.streams[h.id]; ok {
			st.win -= int64(h.length)
			c.streams[h.id] = st
		}
		if h.flags.Has(http2.FlagDataEndStream) {
			delete(c.streams, h.id)
		}
	case http2.FrameHeaders:
		if h.flags.Has(http2.FlagHeadersEndStream) {
			delete(c.streams, h.id)
		}
	case http2.FrameRSTStream:
		delete(c.streams, h.id)
	}
}

func (c *guardConn) onTick() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	stuck := c.wd.stepLocked(c.writing, c.g.lim.write)
	reason := c.stalledLocked()
	c.wd.againLocked(len(c.streams) > 0 || c.writing)
	c.mu.Unlock()
	endStalled(c.g.opts.Logger, c.RemoteAddr(), stuck, reason, func() { c.close() }, c.end)
}

// stalledLocked is conn.stalledLocked for grpc-go's streams, with
// MaxConnectionIdle's check. c.mu is held.
func (c *guardConn) stalledLocked() (reason string) {
	lim := &c.g.lim
	tick := c.wd.tick
	busy := false
	for id, st := range c.streams {
		if !st.ended {
			if lim.request > 0 && tick-st.since > lim.request {
				return "stalled_request"
			}
			continue
		}
		busy = true
		switch {
		case min(st.win, c.connWin) > 0:
			st.stalled = false
		case !st.stalled:
			st.stalled, st.stallSince = true, tick
		case lim.write > 0 && tick-st.stallSince > lim.write:
			return "stalled_write"
		}
		c.streams[id] = st
	}
	if !busy && len(c.streams) > 0 && c.g.idleTicks > 0 && tick-c.progressTick > c.g.idleTicks {
		return "max_idle"
	}
	return ""
}

// end ends the connection with a GOAWAY: at once if grpc-go is not
// writing and its frames so far are whole, else after its write that
// ends with a whole frame; closeGrace later it is closed regardless.
func (c *guardConn) end(code http2.ErrCode, reason string) {
	c.mu.Lock()
	if c.goaway != nil || c.ended {
		c.mu.Unlock()
		return
	}
	c.goaway = appendGoAway(nil, c.lastID, code, reason)
	c.mu.Unlock()
	c.g.opts.Logger.Debug("h2grpc: ending a grpc-go connection", "remote", c.RemoteAddr(), "code", code, "reason", reason)
	if c.wmu.TryLock() {
		c.goAwayLocked()
		c.wmu.Unlock()
	}
	time.AfterFunc(closeGrace, func() { c.close() })
}

// frameHeader is an HTTP/2 frame's header.
type frameHeader struct {
	length int
	typ    http2.FrameType
	flags  http2.Flags
	id     uint32
}

// frameScanner follows the frames of one direction of a connection as
// its bytes pass: it hands each frame's header to a callback, with the
// payload of SETTINGS and WINDOW_UPDATE frames (those of other frames are
// passed over). A callback returning true stops it, for good.
type frameScanner struct {
	stopped bool
	skip    int // bytes to pass over: the client preface, a payload
	hdr     [9]byte
	hn      int
	cur     frameHeader
	keeping bool // cur's payload is being kept
	keep    []byte
}

// feed follows p, and returns the bytes of it followed: all of them,
// unless the callback stopped the scanner (then up to the end of the
// frame it stopped at).
func (s *frameScanner) feed(p []byte, on func(frameHeader, []byte) bool) int {
	all := len(p)
	for len(p) > 0 && !s.stopped {
		switch {
		case s.skip > 0:
			n := min(s.skip, len(p))
			s.skip -= n
			p = p[n:]
		case s.keeping:
			n := min(s.cur.length-len(s.keep), len(p))
			s.keep = append(s.keep, p[:n]...)
			p = p[n:]
			if len(s.keep) == s.cur.length {
				s.keeping = false
				s.stopped = on(s.cur, s.keep)
				s.keep = s.keep[:0]
			}
		default:
			n := copy(s.hdr[s.hn:], p)
			s.hn += n
			p = p[n:]
			if s.hn < len(s.hdr) {
				return all
			}
			s.hn = 0
			h := frameHeader{
				length: int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2]),
				typ:    http2.FrameType(s.hdr[3]),
				flags:  http2.Flags(s.hdr[4]),
				id:     binary.BigEndian.Uint32(s.hdr[5:]) & (1<<31 - 1),
			}
			if (h.typ == http2.FrameSettings || h.typ == http2.FrameWindowUpdate) && h.length > 0 && h.length <= maxFrameSize {
				s.cur, s.keeping = h, true
				continue
			}
			s.skip = h.length
			if s.stopped = on(h, nil); s.stopped {
				// The frame's payload is handed on too.
				n := min(s.skip, len(p))
				return all - len(p) + n
			}
		}
	}
	return all - len(p)
}

// atBoundary reports whether the bytes so far end with a whole frame.
func (s *frameScanner) atBoundary() bool { return s.skip == 0 && !s.keeping && s.hn == 0 }
