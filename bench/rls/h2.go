package rls

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// RawConn is a lean gRPC client for one method, ShouldRateLimit: one
// HTTP/2 connection on which requests marshalled once ahead (Encode) are
// sent as pre-built frames, and of each answer only grpc-status and
// overall_code are read. It is the load generator's client: what it sends
// is byte for byte a gRPC call (the headers grpc-go sends, a
// length-prefixed protobuf message), so any gRPC server answers it, and it
// costs a few microseconds a call instead of grpc-go's tens, so that on a
// small machine the load generator does not take the CPU the servers are
// measured on.
//
// It keeps HTTP/2's rules a server relies on: the preface and settings,
// acknowledgements of the server's SETTINGS and PING, the connection's
// send window (it waits for WINDOW_UPDATE), and it returns its own receive
// window as it reads. It sends no PING, so a server's keepalive policy
// never objects.
type RawConn struct {
	conn net.Conn

	wmu      sync.Mutex
	wcond    *sync.Cond
	wbuf     []byte // frames waiting to be written
	flushing bool   // a caller is writing wbuf
	nextID   uint32
	sendWin  int64 // the connection's send window
	werr     error

	smu     sync.Mutex
	streams map[uint32]*rawCall

	firstHeaders []byte // the first call's HPACK block
	headers      []byte // every later call's
	done         chan struct{}
}

// rawCall is one call in flight.
type rawCall struct {
	data   []byte // the response message, gRPC-framed
	status int    // grpc-status; -1 until the trailers
	msg    string // grpc-message
	err    error
	done   chan struct{}
}

// Encoded is a request marshalled once, as RawConn sends it: the gRPC
// length prefix and the protobuf message.
type Encoded []byte

// Encode marshals req for RawConn.
func Encode(req *pb.RateLimitRequest) (Encoded, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(b)))
	copy(out[5:], b)
	return out, nil
}

const shouldRateLimitPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// DialRaw opens a RawConn to the gRPC server at addr (host:port).
func DialRaw(ctx context.Context, addr string) (*RawConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &RawConn{conn: conn, nextID: 1, sendWin: 65535, streams: make(map[uint32]*rawCall), done: make(chan struct{})}
	c.wcond = sync.NewCond(&c.wmu)
	// Preface, our settings (a large stream window: answers never wait for
	// us) and a connection window as large.
	var pre bytes.Buffer
	pre.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&pre, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	fr.WriteWindowUpdate(0, 1<<30-65535)
	if _, err := conn.Write(pre.Bytes()); err != nil {
		conn.Close()
		return nil, err
	}
	// The server's preface: its SETTINGS, which say how large our HPACK
	// table in it may be.
	br := bufio.NewReaderSize(conn, 32<<10)
	table := uint32(4096)
	rfr := http2.NewFramer(io.Discard, br)
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
	} else {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	f, err := rfr.ReadFrame()
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("rls: raw call: server preface is %v, not SETTINGS", f.Header().Type)
	}
	if v, ok := sf.Value(http2.SettingHeaderTableSize); ok {
		table = v
	}
	if _, err := conn.Write(appendFrameHeader(nil, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)); err != nil {
		conn.Close()
		return nil, err
	}

	// The headers grpc-go sends, HPACK-encoded as a client keeping a
	// dynamic table does: the first call's block adds them to the table,
	// every later call's refers to them (a few bytes), so the server
	// decodes what it decodes for grpc-go's client or Envoy's.
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: shouldRateLimitPath},
		{Name: ":authority", Value: addr}, {Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: "sluice-bench-rls"}, {Name: "te", Value: "trailers"},
	}
	size := uint32(0)
	for _, f := range fields {
		size += f.Size()
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func() []byte {
		hb.Reset()
		for _, f := range fields {
			if size > table {
				f.Sensitive = true // never indexed: the same block every time
			}
			enc.WriteField(f)
		}
		return bytes.Clone(hb.Bytes())
	}
	c.firstHeaders, c.headers = block(), block()
	go c.read(br)
	return c, nil
}

// Close closes the connection; calls in flight fail.
func (c *RawConn) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// appendFrameHeader appends an HTTP/2 frame header.
func appendFrameHeader(b []byte, length int, typ http2.FrameType, flags http2.Flags, stream uint32) []byte {
	b = append(b, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags))
	return binary.BigEndian.AppendUint32(b, stream)
}

// write queues frames built by add (under the write lock) and writes
// them, together with whatever other callers queued meanwhile, in one
// system call when it can.
func (c *RawConn) write(need int64, add func(b []byte) []byte) error {
	c.wmu.Lock()
	for c.werr == nil && need > 0 && c.sendWin < need {
		c.wcond.Wait()
	}
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	c.sendWin -= need
	c.wbuf = add(c.wbuf)
	if c.flushing {
		c.wmu.Unlock()
		return nil // the caller writing now writes ours too
	}
	c.flushing = true
	// Let the callers that are runnable now (woken by one read of several
	// answers) queue their requests first: one write for all of them.
	c.wmu.Unlock()
	runtime.Gosched()
	c.wmu.Lock()
	var spare []byte
	for len(c.wbuf) > 0 && c.werr == nil {
		out := c.wbuf
		c.wbuf = spare[:0]
		c.wmu.Unlock()
		_, err := c.conn.Write(out)
		c.wmu.Lock()
		spare = out
		if err != nil {
			c.werr = err
			c.wcond.Broadcast()
			c.conn.Close() // the reader fails the calls in flight
		}
	}
	c.flushing = false
	err := c.werr
	c.wmu.Unlock()
	return err
}

// Call sends req and returns the answer's overall_code; a gRPC status
// other than OK is an error.
func (c *RawConn) Call(req Encoded) (pb.RateLimitResponse_Code, error) {
	if len(req) > 16384 {
		return 0, errors.New("rls: raw call: request above HTTP/2's default frame size")
	}
	call := &rawCall{status: -1, done: make(chan struct{})}
	var id uint32
	err := c.write(int64(len(req)), func(b []byte) []byte {
		id = c.nextID
		c.nextID += 2
		c.smu.Lock()
		c.streams[id] = call
		c.smu.Unlock()
		h := c.headers
		if id == 1 {
			h = c.firstHeaders
		}
		b = appendFrameHeader(b, len(h), http2.FrameHeaders, http2.FlagHeadersEndHeaders, id)
		b = append(b, h...)
		b = appendFrameHeader(b, len(req), http2.FrameData, http2.FlagDataEndStream, id)
		return append(b, req...)
	})
	if err != nil {
		c.smu.Lock()
		delete(c.streams, id)
		c.smu.Unlock()
		return 0, err
	}
	<-call.done
	if call.err != nil {
		return 0, call.err
	}
	if call.status != 0 {
		return 0, fmt.Errorf("rls: raw call: grpc-status %d: %s", call.status, call.msg)
	}
	return overallCode(call.data)
}

// overallCode reads RateLimitResponse.overall_code (field 1) from a
// gRPC-framed response.
func overallCode(b []byte) (pb.RateLimitResponse_Code, error) {
	if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		return 0, fmt.Errorf("rls: raw call: bad response framing (%d bytes)", len(b))
	}
	b = b[5:]
	code := pb.RateLimitResponse_UNKNOWN
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			code = pb.RateLimitResponse_Code(v)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return code, nil
}

// read reads frames until the connection fails, finishing calls.
func (c *RawConn) read(br *bufio.Reader) {
	defer close(c.done)
	fr := http2.NewFramer(io.Discard, br)
	fr.SetReuseFrames()
	var (
		cur      *rawCall // the call whose header block is being read
		curEnd   bool     // that block ends its stream
		received int64    // DATA bytes since our last WINDOW_UPDATE
	)
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if cur == nil {
			return
		}
		switch f.Name {
		case "grpc-status":
			cur.status, _ = strconv.Atoi(f.Value)
		case "grpc-message":
			cur.msg = f.Value
		}
	})
	finish := func(id uint32, err error) {
		c.smu.Lock()
		call := c.streams[id]
		delete(c.streams, id)
		c.smu.Unlock()
		if call != nil {
			call.err = err
			close(call.done)
		}
	}
	lookup := func(id uint32) *rawCall {
		c.smu.Lock()
		defer c.smu.Unlock()
		return c.streams[id]
	}
	var err error
	for err == nil {
		var f http2.Frame
		if f, err = fr.ReadFrame(); err != nil {
			break
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = c.write(0, func(b []byte) []byte { return appendFrameHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0) })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				err = c.write(0, func(b []byte) []byte {
					b = appendFrameHeader(b, 8, http2.FramePing, http2.FlagPingAck, 0)
					return append(b, data[:]...)
				})
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.wmu.Lock()
				c.sendWin += int64(f.Increment)
				c.wcond.Broadcast()
				c.wmu.Unlock()
			}
		case *http2.HeadersFrame:
			cur, curEnd = lookup(f.StreamID), f.StreamEnded()
			if _, err = dec.Write(f.HeaderBlockFragment()); err == nil && f.HeadersEnded() {
				err = dec.Close()
				if curEnd {
					finish(f.StreamID, nil)
				}
			}
		case *http2.ContinuationFrame:
			if _, err = dec.Write(f.HeaderBlockFragment()); err == nil && f.HeadersEnded() {
				err = dec.Close()
				if curEnd {
					finish(f.StreamID, nil)
				}
			}
		case *http2.DataFrame:
			if call := lookup(f.StreamID); call != nil {
				call.data = append(call.data, f.Data()...)
			}
			if received += int64(f.Length); received > 1<<28 {
				n := uint32(received)
				received = 0
				err = c.write(0, func(b []byte) []byte {
					b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, 0)
					return binary.BigEndian.AppendUint32(b, n)
				})
			}
			if err == nil && f.StreamEnded() {
				finish(f.StreamID, nil)
			}
		case *http2.RSTStreamFrame:
			finish(f.StreamID, fmt.Errorf("rls: raw call: stream reset: %v", f.ErrCode))
		case *http2.GoAwayFrame:
			err = fmt.Errorf("rls: raw call: server sent GOAWAY: %v %q", f.ErrCode, f.DebugData())
		}
	}
	c.wmu.Lock()
	if c.werr == nil {
		c.werr = err
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
	c.conn.Close()
	c.smu.Lock()
	for id, call := range c.streams {
		delete(c.streams, id)
		call.err = err
		close(call.done)
	}
	c.smu.Unlock()
}
