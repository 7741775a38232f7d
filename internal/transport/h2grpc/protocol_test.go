package h2grpc_test

// Tests that speak HTTP/2 to the server frame by frame (RFC 9113, HPACK
// RFC 7541), with golang.org/x/net/http2's Framer as the client, and one
// with Go's own HTTP/2 client.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

const (
	pathEmpty = "/grpc.testing.TestService/EmptyCall"
	pathUnary = "/grpc.testing.TestService/UnaryCall"
	// readTimeout bounds every read of the raw client.
	readTimeout = 10 * time.Second
)

// serveRaw serves svc on a loopback listener until the test ends.
func serveRaw(t *testing.T, o h2grpc.Options, svc *testService) (*h2grpc.Server, string) {
	t.Helper()
	srv := h2grpc.NewServer(o)
	testpb.RegisterTestServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

// rawClient is an HTTP/2 client made of a Framer, an HPACK encoder and
// decoder, and the test's checks.
type rawClient struct {
	t      *testing.T
	nc     net.Conn
	fr     *http2.Framer
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	dec    *hpack.Decoder
	ended  map[uint32]bool // streams whose response has ended
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return newRawClient(t, nc)
}

// newRawClient is a client on nc, which it closes when the test ends.
func newRawClient(t *testing.T, nc net.Conn) *rawClient {
	t.Cleanup(func() { nc.Close() })
	c := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc), dec: hpack.NewDecoder(4096, nil), ended: map[uint32]bool{}}
	c.fr.AllowIllegalWrites = true // the tests break the rules on purpose
	c.enc = hpack.NewEncoder(&c.encBuf)
	return c
}

func (c *rawClient) check(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) preface() {
	c.t.Helper()
	_, err := io.WriteString(c.nc, http2.ClientPreface)
	c.check(err)
}

// handshake sends the preface and settings, acknowledges the server's
// SETTINGS and returns when the server has acknowledged the client's.
func (c *rawClient) handshake(settings ...http2.Setting) {
	c.t.Helper()
	c.preface()
	c.check(c.fr.WriteSettings(settings...))
	for {
		ev := c.next()
		switch {
		case ev.typ == http2.FrameSettings && ev.flags.Has(http2.FlagSettingsAck):
			return
		case ev.typ == http2.FrameSettings:
			c.check(c.fr.WriteSettingsAck())
		case ev.typ == http2.FrameWindowUpdate && ev.stream == 0:
		default:
			c.t.Fatalf("handshake: unexpected %v", ev)
		}
	}
}

// readFrame reads one frame, failing the test on error. The frame is
// valid until the next read.
func (c *rawClient) readFrame() http2.Frame {
	c.t.Helper()
	f, err := c.readFrameWithin(readTimeout)
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return f
}

func (c *rawClient) readFrameWithin(d time.Duration) (http2.Frame, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	return c.fr.ReadFrame()
}

// event is a frame as the tests see it: a HEADERS frame with its
// CONTINUATIONs is one event, with the block decoded.
type event struct {
	typ      http2.FrameType
	flags    http2.Flags
	stream   uint32
	fields   []hpack.HeaderField // HEADERS
	data     []byte              // DATA (without padding), PING, GOAWAY's debug data
	code     http2.ErrCode       // RST_STREAM, GOAWAY
	lastID   uint32              // GOAWAY
	incr     uint32              // WINDOW_UPDATE
	settings []http2.Setting     // SETTINGS
}

func (e event) String() string {
	s := e.typ.String() + " stream " + strconv.Itoa(int(e.stream)) + " flags " + strconv.Itoa(int(e.flags))
	switch e.typ {
	case http2.FrameRSTStream:
		s += " " + e.code.String()
	case http2.FrameGoAway:
		s += " " + e.code.String() + " last " + strconv.Itoa(int(e.lastID)) + " " + string(e.data)
	case http2.FrameHeaders:
		for _, f := range e.fields {
			s += " " + f.Name + "=" + f.Value
		}
	}
	return s
}

// next reads the next event.
func (c *rawClient) next() event {
	c.t.Helper()
	ev, err := c.nextWithin(readTimeout)
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return ev
}

func (c *rawClient) nextWithin(d time.Duration) (event, error) {
	c.t.Helper()
	f, err := c.readFrameWithin(d)
	if err != nil {
		return event{}, err
	}
	h := f.Header()
	ev := event{typ: h.Type, flags: h.Flags, stream: h.StreamID}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		block := bytes.Clone(f.HeaderBlockFragment())
		for ended := f.HeadersEnded(); !ended; {
			// The Framer checks that CONTINUATIONs follow on the stream.
			cf, ok := c.readFrame().(*http2.ContinuationFrame)
			if !ok {
				c.t.Fatalf("HEADERS without END_HEADERS followed by %T", cf)
			}
			block = append(block, cf.HeaderBlockFragment()...)
			ended = cf.HeadersEnded()
		}
		fields, err := c.dec.DecodeFull(block)
		if err != nil {
			c.t.Fatalf("decoding the server's header block: %v", err)
		}
		ev.fields = fields
	case *http2.DataFrame:
		ev.data = bytes.Clone(f.Data())
	case *http2.RSTStreamFrame:
		ev.code = f.ErrCode
	case *http2.GoAwayFrame:
		ev.code, ev.lastID, ev.data = f.ErrCode, f.LastStreamID, bytes.Clone(f.DebugData())
	case *http2.PingFrame:
		ev.data = bytes.Clone(f.Data[:])
	case *http2.WindowUpdateFrame:
		ev.incr = f.Increment
	case *http2.SettingsFrame:
		f.ForeachSetting(func(s http2.Setting) error {
			ev.settings = append(ev.settings, s)
			return nil
		})
	default:
		c.t.Fatalf("unexpected frame from the server: %v", f)
	}
	return ev, nil
}

// block encodes name, value pairs as a header block.
func (c *rawClient) block(fields ...string) []byte {
	c.encBuf.Reset()
	for i := 0; i < len(fields); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(c.encBuf.Bytes())
}

// omit, as a value in reqFields' changes, removes the field.
const omit = "\x00omit"

// reqFields returns a gRPC request's header fields for path, with
// changes (name, value pairs) replacing defaults of the same name or
// added at the end.
func reqFields(path string, changes ...string) []string {
	fields := []string{
		":method", "POST",
		":scheme", "http",
		":path", path,
		":authority", "h2grpc.test",
		"content-type", "application/grpc",
		"te", "trailers",
	}
outer:
	for i := 0; i < len(changes); i += 2 {
		for j := 0; j < len(fields); j += 2 {
			if fields[j] == changes[i] {
				fields[j+1] = changes[i+1]
				continue outer
			}
		}
		fields = append(fields, changes[i], changes[i+1])
	}
	out := fields[:0]
	for i := 0; i < len(fields); i += 2 {
		if fields[i+1] != omit {
			out = append(out, fields[i], fields[i+1])
		}
	}
	return out
}

// send sends a request: HEADERS with fields (and CONTINUATIONs past 16
// KiB), then body in one DATA frame that ends the stream.
func (c *rawClient) send(id uint32, fields []string, body []byte) {
	c.t.Helper()
	c.writeBlock(id, c.block(fields...), false)
	c.check(c.fr.WriteData(id, true, body))
}

// writeBlock writes a header block in HEADERS and as many CONTINUATIONs as
// the default frame size requires.
func (c *rawClient) writeBlock(id uint32, block []byte, endStream bool) {
	c.t.Helper()
	n := min(len(block), 16384)
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:n], EndHeaders: n == len(block), EndStream: endStream}))
	for block = block[n:]; len(block) > 0; block = block[n:] {
		n = min(len(block), 16384)
		c.check(c.fr.WriteContinuation(id, n == len(block), block[:n]))
	}
}

// bigFields returns n fields of 1000 bytes, all different (HPACK refers
// to a repeated field by its index).
func bigFields(n int) []string {
	var fields []string
	for i := range n {
		fields = append(fields, "x-big", strconv.Itoa(i)+string(bytes.Repeat([]byte{'v'}, 1000)))
	}
	return fields
}

// grpcFrame frames msg as a gRPC message: a flag byte, a length, msg.
func grpcFrame(flag byte, msg []byte) []byte {
	b := []byte{flag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

func marshalFrame(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return grpcFrame(0, b)
}

// response is what a stream received.
type response struct {
	headers      []hpack.HeaderField
	trailers     []hpack.HeaderField // nil for a trailers-only response
	headersEnded bool                // the first header block had END_STREAM
	data         []byte
	dataFrames   int
	rst          bool
	code         http2.ErrCode // of the RST_STREAM
}

func get(fields []hpack.HeaderField, name string) (string, bool) {
	for _, f := range fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

// status returns the call's grpc-status: from the trailers, or from the
// headers of a trailers-only response.
func (r *response) status() string {
	fields := r.trailers
	if r.headersEnded {
		fields = r.headers
	}
	v, ok := get(fields, "grpc-status")
	if !ok {
		return "none"
	}
	return v
}

// collect reads until the responses on ids have ended (END_STREAM or
// RST_STREAM). It answers SETTINGS, skips the server's WINDOW_UPDATEs and
// PING acknowledgements, and fails on anything else: GOAWAY, frames on
// other streams, or frames after a stream's end (except RST_STREAM
// NO_ERROR, which may follow a response that ended before the request).
func (c *rawClient) collect(ids ...uint32) map[uint32]*response {
	c.t.Helper()
	rs := map[uint32]*response{}
	for _, id := range ids {
		rs[id] = &response{}
	}
	open := len(ids)
	for open > 0 {
		ev := c.next()
		switch ev.typ {
		case http2.FrameSettings:
			if !ev.flags.Has(http2.FlagSettingsAck) {
				c.check(c.fr.WriteSettingsAck())
			}
			continue
		case http2.FrameWindowUpdate:
			continue
		case http2.FramePing:
			if ev.flags.Has(http2.FlagPingAck) {
				continue
			}
		}
		r := rs[ev.stream]
		if ev.stream != 0 && c.ended[ev.stream] && ev.typ == http2.FrameRSTStream && ev.code == http2.ErrCodeNo {
			continue
		}
		if r == nil || c.ended[ev.stream] {
			c.t.Fatalf("unexpected %v", ev)
		}
		switch ev.typ {
		case http2.FrameHeaders:
			switch {
			case r.headers == nil:
				r.headers = ev.fields
				r.headersEnded = ev.flags.Has(http2.FlagHeadersEndStream)
			case r.trailers == nil && !r.headersEnded:
				if !ev.flags.Has(http2.FlagHeadersEndStream) {
					c.t.Fatalf("trailers without END_STREAM: %v", ev)
				}
				r.trailers = ev.fields
			default:
				c.t.Fatalf("a third header block: %v", ev)
			}
		case http2.FrameData:
			if r.headers == nil {
				c.t.Fatalf("DATA before HEADERS: %v", ev)
			}
			if ev.flags.Has(http2.FlagDataEndStream) {
				c.t.Fatalf("the server ended a gRPC response with DATA: %v", ev)
			}
			r.data = append(r.data, ev.data...)
			r.dataFrames++
		case http2.FrameRSTStream:
			r.rst, r.code = true, ev.code
		default:
			c.t.Fatalf("unexpected %v", ev)
		}
		if ev.flags.Has(http2.FlagHeadersEndStream) && ev.typ == http2.FrameHeaders || ev.typ == http2.FrameRSTStream {
			c.ended[ev.stream] = true
			open--
		}
	}
	return rs
}

// call sends a request on id and returns its response.
func (c *rawClient) call(id uint32, fields []string, body []byte) *response {
	c.t.Helper()
	c.send(id, fields, body)
	return c.collect(id)[id]
}

// checkOK checks that r is a successful gRPC response carrying msg.
func checkOK(t *testing.T, r *response, msg proto.Message) {
	t.Helper()
	if r.rst {
		t.Fatalf("RST_STREAM %v", r.code)
	}
	if v, _ := get(r.headers, ":status"); v != "200" {
		t.Fatalf(":status %q, headers %v", v, r.headers)
	}
	if r.headers[0].Name != ":status" {
		t.Fatalf(":status is not the first field: %v", r.headers)
	}
	if v, _ := get(r.headers, "content-type"); v != "application/grpc" {
		t.Fatalf("content-type %q", v)
	}
	if r.headersEnded || r.trailers == nil {
		t.Fatalf("no trailers: headers %v", r.headers)
	}
	if s := r.status(); s != "0" {
		m, _ := get(r.trailers, "grpc-message")
		t.Fatalf("grpc-status %s: %s", s, m)
	}
	want := marshalFrame(t, msg)
	if !bytes.Equal(r.data, want) {
		t.Fatalf("body %x, want %x", r.data, want)
	}
}

func TestProtoServerPreface(t *testing.T) {
	const large = 4<<20 + 5 - 65535 // a message of MaxRecvMsgSize past a 64 KiB window
	for _, tc := range []struct {
		o        h2grpc.Options
		mcs, mhl uint32
		iws      uint32 // SETTINGS_INITIAL_WINDOW_SIZE; 0: not sent (65535)
		conn     uint32 // the connection's window
	}{
		{h2grpc.Options{MaxConcurrentStreams: 7, MaxHeaderListSize: 12345}, 7, 12345, 0, 32 << 20},
		{h2grpc.Options{}, 256, 64 << 10, 0, 32 << 20},
		{h2grpc.Options{InitialWindowSize: 1 << 20, MaxConcurrentStreams: 7}, 7, 64 << 10, 1 << 20, 32 << 20},
		// Below 65535: HTTP/2's default.
		{h2grpc.Options{InitialWindowSize: 1000}, 256, 64 << 10, 0, 32 << 20},
		// The connection's window is raised to hold every stream's and
		// one large message.
		{h2grpc.Options{MaxConcurrentStreams: 1000}, 1000, 64 << 10, 0, 1000*65536 + large + 65536},
		{h2grpc.Options{InitialConnWindowSize: 1 << 20}, 256, 64 << 10, 0, 256*65536 + large + 65536},
		{h2grpc.Options{InitialConnWindowSize: 40 << 20}, 256, 64 << 10, 0, 40 << 20},
	} {
		_, addr := serveRaw(t, tc.o, &testService{})
		c := dialRaw(t, addr)
		// The server speaks first: SETTINGS, then the connection's window.
		f := c.readFrame()
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() || sf.StreamID != 0 {
			t.Fatalf("the first frame is %v, want SETTINGS", f)
		}
		got := map[http2.SettingID]uint32{}
		sf.ForeachSetting(func(s http2.Setting) error { got[s.ID] = s.Val; return nil })
		if v, ok := got[http2.SettingMaxConcurrentStreams]; !ok || v != tc.mcs {
			t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (sent: %v), want %d", v, ok, tc.mcs)
		}
		if v, ok := got[http2.SettingMaxHeaderListSize]; !ok || v != tc.mhl {
			t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d (sent: %v), want %d", v, ok, tc.mhl)
		}
		if v, ok := got[http2.SettingInitialWindowSize]; ok != (tc.iws != 0) || v != tc.iws {
			t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE = %d (sent: %v), want %d", v, ok, tc.iws)
		}
		f = c.readFrame()
		wu, ok := f.(*http2.WindowUpdateFrame)
		if !ok || wu.StreamID != 0 {
			t.Fatalf("the second frame is %v, want a connection WINDOW_UPDATE", f)
		}
		if wu.Increment != tc.conn-65535 {
			t.Errorf("connection WINDOW_UPDATE of %d, want %d (a window of %d)", wu.Increment, tc.conn-65535, tc.conn)
		}
		// The client's SETTINGS are acknowledged, and so are later ones.
		c.preface()
		c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
		c.check(c.fr.WriteSettingsAck())
		c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingEnablePush, Val: 0}))
		for i := range 2 {
			f := c.readFrame()
			if ack, ok := f.(*http2.SettingsFrame); !ok || !ack.IsAck() || ack.Length != 0 {
				t.Fatalf("frame %d after the client's SETTINGS: %v, want SETTINGS ACK", i, f)
			}
		}
		// Nothing else: the server does not acknowledge the client's ACK.
		if f, err := c.readFrameWithin(100 * time.Millisecond); !isTimeout(err) {
			t.Fatalf("after the ACKs: %v, %v", f, err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProtoPing(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	c := dialRaw(t, addr)
	c.handshake()
	// A PING ACK is not answered; a PING is, with its 8 bytes.
	c.check(c.fr.WritePing(true, [8]byte{9, 9, 9, 9, 9, 9, 9, 9}))
	for _, data := range [][8]byte{{1, 2, 3, 4, 5, 6, 7, 8}, {0xff, 0, 0xfe, 1, 0xfd, 2, 0xfc, 3}} {
		c.check(c.fr.WritePing(false, data))
		ev := c.next()
		if ev.typ != http2.FramePing || !ev.flags.Has(http2.FlagPingAck) || ev.stream != 0 {
			t.Fatalf("answer to PING: %v", ev)
		}
		if !bytes.Equal(ev.data, data[:]) {
			t.Fatalf("PING ACK carries %x, want %x", ev.data, data)
		}
	}
}

func TestProtoUnary(t *testing.T) {
	svc := &testService{}
	_, addr := serveRaw(t, h2grpc.Options{}, svc)
	c := dialRaw(t, addr)
	c.handshake()
	empty := marshalFrame(t, &testpb.Empty{})

	t.Log("EmptyCall")
	checkOK(t, c.call(1, reqFields(pathEmpty), empty), &testpb.Empty{})

	t.Log("UnaryCall, on the same connection (HPACK's dynamic table in use)")
	req := marshalFrame(t, &testpb.SimpleRequest{ResponseSize: 300, Payload: payload(200)})
	checkOK(t, c.call(3, reqFields(pathUnary), req), &testpb.SimpleResponse{Payload: payload(300)})

	t.Log("a header block in HEADERS and two CONTINUATIONs")
	block := c.block(reqFields(pathEmpty, "x-padding", string(bytes.Repeat([]byte("p"), 100)))...)
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block[:10]}))
	c.check(c.fr.WriteContinuation(5, false, block[10:40]))
	c.check(c.fr.WriteContinuation(5, true, block[40:]))
	c.check(c.fr.WriteData(5, true, empty))
	checkOK(t, c.collect(5)[5], &testpb.Empty{})

	t.Log("PADDED and PRIORITY HEADERS, PADDED DATA in two frames")
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: 7, BlockFragment: c.block(reqFields(pathUnary)...), EndHeaders: true,
		PadLength: 17, Priority: http2.PriorityParam{StreamDep: 3, Exclusive: true, Weight: 200},
	}))
	c.check(c.fr.WriteDataPadded(7, false, req[:7], make([]byte, 30)))
	c.check(c.fr.WriteDataPadded(7, true, req[7:], make([]byte, 255)))
	checkOK(t, c.collect(7)[7], &testpb.SimpleResponse{Payload: payload(300)})

	t.Log("the request's end in trailers (HEADERS with END_STREAM after DATA), and a PRIORITY frame")
	c.check(c.fr.WritePriority(9, http2.PriorityParam{Weight: 1}))
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 9, BlockFragment: c.block(reqFields(pathEmpty)...), EndHeaders: true}))
	c.check(c.fr.WriteData(9, false, empty))
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 9, BlockFragment: c.block("x-trailer", "t"), EndHeaders: true, EndStream: true}))
	checkOK(t, c.collect(9)[9], &testpb.Empty{})

	if got := svc.calls.Load(); got != 5 {
		t.Fatalf("the handlers ran %d times, want 5", got)
	}
}

// expectGoAway reads until a GOAWAY, which must carry code (and, if
// lastID >= 0, that last stream id), then expects the connection to
// close.
func (c *rawClient) expectGoAway(code http2.ErrCode, lastID int) {
	c.t.Helper()
	for {
		ev, err := c.nextWithin(readTimeout)
		if err != nil {
			c.t.Fatalf("no GOAWAY %v before %v", code, err)
		}
		switch ev.typ {
		case http2.FrameSettings, http2.FrameWindowUpdate, http2.FramePing:
			continue
		case http2.FrameGoAway:
		default:
			c.t.Fatalf("waiting for GOAWAY: %v", ev)
		}
		if ev.code != code || ev.stream != 0 {
			c.t.Fatalf("GOAWAY %v (%s), want %v", ev.code, ev.data, code)
		}
		if lastID >= 0 && ev.lastID != uint32(lastID) {
			c.t.Fatalf("GOAWAY's last stream %d, want %d", ev.lastID, lastID)
		}
		break
	}
	c.expectClose()
}

// expectClose reads until the server closes the connection.
func (c *rawClient) expectClose() {
	c.t.Helper()
	for {
		f, err := c.readFrameWithin(readTimeout)
		if err == nil {
			switch f.(type) {
			case *http2.SettingsFrame, *http2.WindowUpdateFrame, *http2.PingFrame, *http2.GoAwayFrame:
				continue
			}
			c.t.Fatalf("expected the connection to close, got %v", f)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return
		}
		c.t.Fatalf("expected the connection to close: %v", err)
	}
}

func TestProtoBadPreface(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	for _, preface := range []string{
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\r", // one byte off
		"GET / HTTP/1.1\r\nHost: h2grpc.test\r\n\r\n",
	} {
		c := dialRaw(t, addr)
		_, err := io.WriteString(c.nc, preface)
		c.check(err)
		for {
			f, err := c.readFrameWithin(readTimeout)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("%q: expected the connection to close: %v", preface, err)
				}
				break
			}
			switch f := f.(type) {
			case *http2.SettingsFrame, *http2.WindowUpdateFrame:
			case *http2.GoAwayFrame:
				if f.ErrCode != http2.ErrCodeProtocol {
					t.Fatalf("%q: GOAWAY %v", preface, f.ErrCode)
				}
			default:
				t.Fatalf("%q: unexpected %v", preface, f)
			}
		}
	}
}

// TestProtoConnErrors: protocol violations end the connection with GOAWAY
// and the matching error code.
func TestProtoConnErrors(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	for _, tc := range []struct {
		name   string
		code   http2.ErrCode
		lastID int // -1: not checked
		noHS   bool
		send   func(c *rawClient)
	}{
		{"first frame not SETTINGS", http2.ErrCodeProtocol, 0, true, func(c *rawClient) {
			c.preface()
			c.check(c.fr.WritePing(false, [8]byte{}))
		}},
		{"first frame a SETTINGS ACK", http2.ErrCodeProtocol, 0, true, func(c *rawClient) {
			c.preface()
			c.check(c.fr.WriteSettingsAck())
		}},
		{"frame larger than 16384", http2.ErrCodeFrameSize, 0, false, func(c *rawClient) {
			// The header alone: the server answers before reading a payload
			// it will not take, and one left unread could make the kernel
			// reset the connection, and the client lose the GOAWAY.
			_, err := c.nc.Write([]byte{0, 0x40, 0x01, byte(http2.FramePing), 0, 0, 0, 0, 0})
			c.check(err)
		}},
		{"HEADERS on an even stream", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: c.block(reqFields(pathEmpty)...), EndHeaders: true, EndStream: true}))
		}},
		{"HEADERS on stream 0", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 0, BlockFragment: c.block(reqFields(pathEmpty)...), EndHeaders: true, EndStream: true}))
		}},
		{"HEADERS on an even stream after a call", http2.ErrCodeProtocol, 1, false, func(c *rawClient) {
			checkOK(c.t, c.call(1, reqFields(pathEmpty), marshalFrame(c.t, &testpb.Empty{})), &testpb.Empty{})
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 4, BlockFragment: c.block(reqFields(pathEmpty)...), EndHeaders: true, EndStream: true}))
		}},
		{"header block interrupted by PING", http2.ErrCodeProtocol, -1, false, func(c *rawClient) {
			block := c.block(reqFields(pathEmpty)...)
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:5]}))
			c.check(c.fr.WritePing(false, [8]byte{}))
		}},
		{"header block interrupted by DATA", http2.ErrCodeProtocol, -1, false, func(c *rawClient) {
			block := c.block(reqFields(pathEmpty)...)
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:5]}))
			c.check(c.fr.WriteData(1, true, marshalFrame(c.t, &testpb.Empty{})))
		}},
		{"CONTINUATION on another stream", http2.ErrCodeProtocol, -1, false, func(c *rawClient) {
			block := c.block(reqFields(pathEmpty)...)
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:5]}))
			c.check(c.fr.WriteContinuation(3, true, block[5:]))
		}},
		{"CONTINUATION without HEADERS", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteContinuation(1, true, c.block(reqFields(pathEmpty)...)))
		}},
		{"connection WINDOW_UPDATE past 2^31-1", http2.ErrCodeFlowControl, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteWindowUpdate(0, 1<<31-1))
		}},
		{"connection WINDOW_UPDATE of 0", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteWindowUpdate(0, 0))
		}},
		{"WINDOW_UPDATE on a stream not opened", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteWindowUpdate(1, 100))
		}},
		{"WINDOW_UPDATE of 5 bytes", http2.ErrCodeFrameSize, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 1, 0, 0}))
		}},
		{"PUSH_PROMISE", http2.ErrCodeProtocol, -1, false, func(c *rawClient) {
			c.check(c.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: c.block(reqFields(pathEmpty)...), EndHeaders: true}))
		}},
		{"SETTINGS_MAX_FRAME_SIZE below 16384", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16383}))
		}},
		{"SETTINGS_MAX_FRAME_SIZE above 2^24-1", http2.ErrCodeProtocol, 0, true, func(c *rawClient) {
			c.preface()
			c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 24}))
		}},
		{"SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1", http2.ErrCodeFlowControl, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31}))
		}},
		{"SETTINGS_ENABLE_PUSH of 2", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}))
		}},
		{"SETTINGS of 7 bytes", http2.ErrCodeFrameSize, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRawFrame(http2.FrameSettings, 0, 0, []byte{0, 4, 0, 0, 0, 1, 0}))
		}},
		{"SETTINGS ACK with a payload", http2.ErrCodeFrameSize, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRawFrame(http2.FrameSettings, http2.FlagSettingsAck, 0, []byte{0, 4, 0, 0, 0, 1}))
		}},
		{"SETTINGS on a stream", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRawFrame(http2.FrameSettings, 0, 1, nil))
		}},
		{"garbage HPACK block", http2.ErrCodeCompression, -1, false, func(c *rawClient) {
			// An indexed field past the static table and the empty dynamic
			// one.
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0x7f}, EndHeaders: true, EndStream: true}))
		}},
		{"HPACK block ending mid-field", http2.ErrCodeCompression, -1, false, func(c *rawClient) {
			block := c.block(reqFields(pathEmpty)...)
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: append(block, 0x40, 0x05, 'a'), EndHeaders: true, EndStream: true}))
		}},
		{"header block past 4 times SETTINGS_MAX_HEADER_LIST_SIZE (CONTINUATION flood)", http2.ErrCodeEnhanceYourCalm, -1, false, func(c *rawClient) {
			// Up to the frame that crosses 256 KiB, and no more: the server
			// reads no further.
			block := c.block(bigFields(500)...)
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:16384]}))
			for sent := 16384; sent <= 4*64<<10; sent += 16384 {
				c.check(c.fr.WriteContinuation(1, false, block[sent:sent+16384]))
			}
		}},
		{"DATA on a stream never opened", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteData(1, true, marshalFrame(c.t, &testpb.Empty{})))
		}},
		{"DATA on stream 0", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteData(0, true, []byte{1}))
		}},
		{"DATA with padding as long as the frame", http2.ErrCodeProtocol, 1, false, func(c *rawClient) {
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(reqFields(pathEmpty)...), EndHeaders: true}))
			c.check(c.fr.WriteRawFrame(http2.FrameData, http2.FlagDataPadded|http2.FlagDataEndStream, 1, []byte{3, 0, 0}))
		}},
		{"RST_STREAM on stream 0", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRSTStream(0, http2.ErrCodeCancel))
		}},
		{"RST_STREAM on a stream not opened", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
		}},
		{"PING on a stream", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRawFrame(http2.FramePing, 0, 1, make([]byte, 8)))
		}},
		{"PING of 7 bytes", http2.ErrCodeFrameSize, 0, false, func(c *rawClient) {
			c.check(c.fr.WriteRawFrame(http2.FramePing, 0, 0, make([]byte, 7)))
		}},
		{"PRIORITY on stream 0", http2.ErrCodeProtocol, 0, false, func(c *rawClient) {
			c.check(c.fr.WritePriority(0, http2.PriorityParam{Weight: 1}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			if !tc.noHS {
				c.handshake()
			}
			tc.send(c)
			c.expectGoAway(tc.code, tc.lastID)
		})
	}
}

// TestProtoStreamErrors: malformed and refused requests end their own
// stream, and the connection goes on serving.
func TestProtoStreamErrors(t *testing.T) {
	svc := &testService{}
	_, addr := serveRaw(t, h2grpc.Options{MaxRecvMsgSize: 1000}, svc)
	c := dialRaw(t, addr)
	c.handshake()
	empty := marshalFrame(t, &testpb.Empty{})
	emptyMsg := empty[5:]
	id := uint32(1)
	for _, tc := range []struct {
		name   string
		fields []string
		body   []byte
		status string // :status, if not 200
		grpc   string // grpc-status; "" for RST_STREAM
		rst    http2.ErrCode
	}{
		{"GET", reqFields(pathEmpty, ":method", "GET"), empty, "405", "13", 0},
		{"content-type text/plain", reqFields(pathEmpty, "content-type", "text/plain"), empty, "415", "13", 0},
		{"no content-type", reqFields(pathEmpty, "content-type", omit), empty, "415", "13", 0},
		{"content-type application/grpc+proto", reqFields(pathEmpty, "content-type", "application/grpc+proto"), empty, "", "0", 0},
		{"no :path", reqFields(pathEmpty, ":path", omit), empty, "", "", http2.ErrCodeProtocol},
		{"no :method", reqFields(pathEmpty, ":method", omit), empty, "", "", http2.ErrCodeProtocol},
		{"no :scheme", reqFields(pathEmpty, ":scheme", omit), empty, "", "", http2.ErrCodeProtocol},
		{"uppercase header name", reqFields(pathEmpty, "X-Upper", "v"), empty, "", "", http2.ErrCodeProtocol},
		{"unknown pseudo-header", reqFields(pathEmpty, ":protocol", "x"), empty, "", "", http2.ErrCodeProtocol},
		{"pseudo-header after a regular one", append(reqFields(pathEmpty), ":authority", "late"), empty, "", "", http2.ErrCodeProtocol},
		{"two :path", []string{":method", "POST", ":scheme", "http", ":path", pathEmpty, ":path", "/other", "content-type", "application/grpc"}, empty, "", "", http2.ErrCodeProtocol},
		{"two :method", []string{":method", "POST", ":method", "GET", ":scheme", "http", ":path", pathEmpty, "content-type", "application/grpc"}, empty, "", "", http2.ErrCodeProtocol},
		{"connection header", reqFields(pathEmpty, "connection", "keep-alive"), empty, "", "", http2.ErrCodeProtocol},
		{"CR LF in a header value", reqFields(pathEmpty, "x-split", "a\r\nx-injected: b"), empty, "", "", http2.ErrCodeProtocol},
		{"NUL in a header value", reqFields(pathEmpty, "x-nul", "a\x00b"), empty, "", "", http2.ErrCodeProtocol},
		{"space in a header name", reqFields(pathEmpty, "x bad", "v"), empty, "", "", http2.ErrCodeProtocol},
		{"colon inside a header name", reqFields(pathEmpty, "x:bad", "v"), empty, "", "", http2.ErrCodeProtocol},
		{"tab in a header value", reqFields(pathEmpty, "x-tab", "a\tb"), empty, "", "0", 0},
		{"te other than trailers", reqFields(pathEmpty, "te", "gzip"), empty, "", "", http2.ErrCodeProtocol},
		{"header list larger than MaxHeaderListSize", append(reqFields(pathEmpty), bigFields(70)...), empty, "", "8", 0},
		{"unknown method", reqFields("/no.Such/Method"), empty, "", "12", 0},
		{"grpc-encoding gzip", reqFields(pathEmpty, "grpc-encoding", "gzip"), empty, "", "12", 0},
		{"malformed grpc-timeout", reqFields(pathEmpty, "grpc-timeout", "5x"), empty, "", "13", 0},
		{"grpc-timeout too long", reqFields(pathEmpty, "grpc-timeout", "123456789S"), empty, "", "13", 0},
		{"two messages for a unary method", reqFields(pathEmpty), append(bytes.Clone(empty), empty...), "", "13", 0},
		{"compressed flag without grpc-encoding", reqFields(pathEmpty), grpcFrame(1, emptyMsg), "", "13", 0},
		{"compressed flag with grpc-encoding identity", reqFields(pathEmpty, "grpc-encoding", "identity"), grpcFrame(1, emptyMsg), "", "13", 0},
		{"flag byte 2", reqFields(pathEmpty), grpcFrame(2, emptyMsg), "", "13", 0},
		{"no message", reqFields(pathEmpty), nil, "", "13", 0},
		{"truncated message", reqFields(pathUnary), marshalFrame(t, &testpb.SimpleRequest{Payload: payload(10)})[:10], "", "13", 0},
		{"message larger than MaxRecvMsgSize", reqFields(pathUnary), marshalFrame(t, &testpb.SimpleRequest{Payload: payload(2000)}), "", "8", 0},
		// The prefix alone, announcing 1 MB.
		{"message declared larger than MaxRecvMsgSize", reqFields(pathUnary), []byte{0, 0, 0x0f, 0x42, 0x40}, "", "8", 0},
	} {
		r := c.call(id, tc.fields, tc.body)
		id += 2
		if tc.grpc == "" {
			if !r.rst || r.code != tc.rst {
				t.Errorf("%s: got %+v, want RST_STREAM %v", tc.name, r, tc.rst)
			}
			continue
		}
		if r.rst {
			t.Errorf("%s: RST_STREAM %v", tc.name, r.code)
			continue
		}
		want := tc.status
		if want == "" {
			want = "200"
		}
		if v, _ := get(r.headers, ":status"); v != want {
			t.Errorf("%s: :status %q, want %s", tc.name, v, want)
		}
		if v, _ := get(r.headers, "content-type"); v != "application/grpc" {
			t.Errorf("%s: content-type %q", tc.name, v)
		}
		if tc.grpc != "0" && (!r.headersEnded || len(r.data) != 0) {
			t.Errorf("%s: not a trailers-only response: %+v", tc.name, r)
		}
		if s := r.status(); s != tc.grpc {
			m, _ := get(append(r.headers, r.trailers...), "grpc-message")
			t.Errorf("%s: grpc-status %s (%s), want %s", tc.name, s, m, tc.grpc)
		}
	}
	// Only the calls with application/grpc+proto and with a tab in a
	// value reached a handler.
	if got := svc.calls.Load(); got != 2 {
		t.Errorf("the handlers ran %d times, want 2", got)
	}
	// The connection still serves.
	checkOK(t, c.call(id, reqFields(pathEmpty), empty), &testpb.Empty{})
	req := marshalFrame(t, &testpb.SimpleRequest{ResponseSize: 10, Payload: payload(990)})
	checkOK(t, c.call(id+2, reqFields(pathUnary), req), &testpb.SimpleResponse{Payload: payload(10)})
}

// TestProtoStreamResets: errors confined to a stream reset it alone.
// (DATA past a window is a connection error: TestProtoRecvWindow.)
func TestProtoStreamResets(t *testing.T) {
	svc := &testService{}
	canceled := make(chan error, 1)
	svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if req.GetFillUsername() { // the tests' sign for a handler that blocks
			<-ctx.Done()
			canceled <- ctx.Err()
			return nil, ctx.Err()
		}
		return &testpb.SimpleResponse{Payload: payload(int(req.GetResponseSize()))}, nil
	}
	_, addr := serveRaw(t, h2grpc.Options{}, svc)
	c := dialRaw(t, addr)
	c.handshake()
	headers := func(id uint32) {
		c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block(reqFields(pathUnary)...), EndHeaders: true}))
	}
	expectCanceled := func() {
		t.Helper()
		select {
		case err := <-canceled:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the handler saw %v", err)
			}
		case <-time.After(readTimeout):
			t.Fatal("the handler was not canceled")
		}
	}
	expectRST := func(id uint32, code http2.ErrCode) {
		t.Helper()
		if r := c.collect(id)[id]; !r.rst || r.code != code {
			t.Fatalf("stream %d: %+v, want RST_STREAM %v", id, r, code)
		}
	}

	// A stream WINDOW_UPDATE of 0.
	headers(1)
	c.check(c.fr.WriteWindowUpdate(1, 0))
	expectRST(1, http2.ErrCodeProtocol)

	// A stream WINDOW_UPDATE past 2^31-1.
	headers(3)
	c.check(c.fr.WriteWindowUpdate(3, 1<<31-1))
	expectRST(3, http2.ErrCodeFlowControl)

	// A PRIORITY frame of 4 bytes.
	headers(5)
	c.check(c.fr.WriteRawFrame(http2.FramePriority, 0, 5, []byte{0, 0, 0, 1}))
	expectRST(5, http2.ErrCodeFrameSize)

	// Trailers without END_STREAM.
	headers(7)
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: c.block("x-trailer", "t"), EndHeaders: true}))
	expectRST(7, http2.ErrCodeProtocol)

	// DATA after the request ended: STREAM_CLOSED, and the handler is
	// canceled.
	block := marshalFrame(t, &testpb.SimpleRequest{FillUsername: true})
	c.send(9, reqFields(pathUnary), block)
	c.check(c.fr.WriteData(9, true, block))
	expectRST(9, http2.ErrCodeStreamClosed)
	expectCanceled()

	// Trailers after the request ended: the same.
	c.send(11, reqFields(pathUnary), block)
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 11, BlockFragment: c.block("x-trailer", "t"), EndHeaders: true, EndStream: true}))
	expectRST(11, http2.ErrCodeStreamClosed)
	<-canceled

	// A client's RST_STREAM cancels the handler; frames after it on the
	// stream are late, not errors.
	c.send(13, reqFields(pathUnary), block)
	c.check(c.fr.WriteRSTStream(13, http2.ErrCodeCancel))
	expectCanceled()
	c.check(c.fr.WriteData(13, true, block))
	c.check(c.fr.WriteWindowUpdate(13, 1))
	c.check(c.fr.WriteRSTStream(13, http2.ErrCodeCancel))

	// Trailers with a pseudo-header (RFC 9113 §8.1).
	headers(15)
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 15, BlockFragment: c.block(":path", "/x"), EndHeaders: true, EndStream: true}))
	expectRST(15, http2.ErrCodeProtocol)

	// The connection still serves.
	req := marshalFrame(t, &testpb.SimpleRequest{ResponseSize: 3})
	checkOK(t, c.call(17, reqFields(pathUnary), req), &testpb.SimpleResponse{Payload: payload(3)})
	if got := svc.calls.Load(); got != 4 {
		t.Fatalf("the handlers ran %d times, want 4", got)
	}
}

// TestProtoLateFrames: frames on a stream the server has closed are late,
// not errors, and a late header block, even one in HEADERS and
// CONTINUATION, is still decoded: HPACK's dynamic table stays in step.
func TestProtoLateFrames(t *testing.T) {
	svc := &testService{}
	_, addr := serveRaw(t, h2grpc.Options{}, svc)
	c := dialRaw(t, addr)
	c.handshake()
	empty := marshalFrame(t, &testpb.Empty{})
	// An unknown method is answered before the request's end, and the
	// stream reset (NO_ERROR).
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(reqFields("/no.Such/Method")...), EndHeaders: true}))
	if r := c.collect(1)[1]; r.status() != "12" {
		t.Fatalf("unknown method: %+v", r)
	}
	if ev := c.next(); ev.typ != http2.FrameRSTStream || ev.stream != 1 || ev.code != http2.ErrCodeNo {
		t.Fatalf("after the answer: %v, want RST_STREAM NO_ERROR", ev)
	}
	c.check(c.fr.WriteData(1, false, empty))
	c.check(c.fr.WriteWindowUpdate(1, 1000))
	c.check(c.fr.WritePriority(1, http2.PriorityParam{Weight: 3}))
	// Trailers in HEADERS and CONTINUATION, adding a field to the
	// dynamic table that the next request refers to.
	block := c.block("x-late", "a value the next block refers to", "x-more", "more")
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:4], EndStream: true}))
	c.check(c.fr.WriteContinuation(1, true, block[4:]))
	c.check(c.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	checkOK(t, c.call(3, reqFields(pathEmpty, "x-late", "a value the next block refers to"), empty), &testpb.Empty{})
}

// TestProtoMaxConcurrentStreams: a stream past the limit is refused.
func TestProtoMaxConcurrentStreams(t *testing.T) {
	svc := &testService{}
	entered, release := make(chan struct{}, 10), make(chan struct{})
	svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		entered <- struct{}{}
		<-release
		return &testpb.SimpleResponse{Username: "released"}, nil
	}
	_, addr := serveRaw(t, h2grpc.Options{MaxConcurrentStreams: 2}, svc)
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll() // before Stop, which waits for the handlers
	c := dialRaw(t, addr)
	c.handshake()
	req := marshalFrame(t, &testpb.SimpleRequest{})
	c.send(1, reqFields(pathUnary), req)
	c.send(3, reqFields(pathUnary), req)
	for range 2 {
		select {
		case <-entered:
		case <-time.After(readTimeout):
			t.Fatal("the handlers did not start")
		}
	}
	if r := c.call(5, reqFields(pathUnary), req); !r.rst || r.code != http2.ErrCodeRefusedStream {
		t.Fatalf("the third stream: %+v, want RST_STREAM REFUSED_STREAM", r)
	}
	releaseAll()
	rs := c.collect(1, 3)
	for _, id := range []uint32{1, 3} {
		checkOK(t, rs[id], &testpb.SimpleResponse{Username: "released"})
	}
	// An open stream that has not sent all of its request counts too.
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: c.block(reqFields(pathUnary)...), EndHeaders: true}))
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 9, BlockFragment: c.block(reqFields(pathUnary)...), EndHeaders: true}))
	if r := c.call(11, reqFields(pathUnary), req); !r.rst || r.code != http2.ErrCodeRefusedStream {
		t.Fatalf("the third stream, beside two waiting for DATA: %+v, want RST_STREAM REFUSED_STREAM", r)
	}
	// Once one is reset, there is room.
	c.check(c.fr.WriteRSTStream(7, http2.ErrCodeCancel))
	checkOK(t, c.call(13, reqFields(pathUnary), req), &testpb.SimpleResponse{Username: "released"})
	c.check(c.fr.WriteData(9, true, req))
	checkOK(t, c.collect(9)[9], &testpb.SimpleResponse{Username: "released"})
}

// TestProtoRapidReset: a client opening streams and resetting them at
// once (CVE-2023-44487) never has more than MaxConcurrentStreams
// handlers running.
func TestProtoRapidReset(t *testing.T) {
	const limit = 3
	svc := &testService{}
	var running, peak, finished atomic.Int32
	release := make(chan struct{})
	svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release // a handler that does not heed cancellation
		running.Add(-1)
		finished.Add(1)
		return &testpb.SimpleResponse{}, nil
	}
	_, addr := serveRaw(t, h2grpc.Options{MaxConcurrentStreams: limit}, svc)
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll() // before Stop, which waits for the handlers
	c := dialRaw(t, addr)
	c.handshake()
	req := marshalFrame(t, &testpb.SimpleRequest{})
	const streams = 200
	for i := range streams {
		id := uint32(2*i + 1)
		if i%3 == 2 {
			// Some streams are reset before their request is complete:
			// their handlers never run.
			c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block(reqFields(pathUnary)...), EndHeaders: true}))
		} else {
			c.send(id, reqFields(pathUnary), req)
		}
		c.check(c.fr.WriteRSTStream(id, http2.ErrCodeCancel))
	}
	// The PING's answer comes once the server has read all of the above.
	c.check(c.fr.WritePing(false, [8]byte{'s', 'y', 'n', 'c'}))
	refused := 0
	for {
		ev := c.next()
		if ev.typ == http2.FramePing && ev.flags.Has(http2.FlagPingAck) {
			break
		}
		switch {
		case ev.typ == http2.FrameRSTStream && ev.code == http2.ErrCodeRefusedStream:
			refused++
		case ev.typ == http2.FrameSettings, ev.typ == http2.FrameWindowUpdate:
		default:
			t.Fatalf("unexpected %v", ev)
		}
	}
	deadline := time.Now().Add(readTimeout)
	for running.Load() < limit && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // for any handler past the limit to show
	if p := peak.Load(); p != limit {
		t.Fatalf("%d handlers ran at once, want %d (MaxConcurrentStreams)", p, limit)
	}
	if got := svc.calls.Load(); got != limit {
		t.Fatalf("%d handlers ran, want %d", got, limit)
	}
	if refused < streams*2/3-limit {
		t.Fatalf("%d streams refused, want at least %d", refused, streams*2/3-limit)
	}
	releaseAll()
	for finished.Load() < limit && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// The reset streams' answers are not sent; new calls are served once
	// the handlers have returned (until then, they may be refused).
	id := uint32(2*streams + 1)
	for ; ; id += 2 {
		r := c.call(id, reqFields(pathUnary), req)
		if r.rst && r.code == http2.ErrCodeRefusedStream && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		checkOK(t, r, &testpb.SimpleResponse{})
		break
	}
	if p := peak.Load(); p != limit {
		t.Fatalf("%d handlers ran at once, want %d", p, limit)
	}
}

// TestProtoSendWindow: the server sends no more than the client's stream
// window allows, and resumes as the client grants more.
func TestProtoSendWindow(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	c := dialRaw(t, addr)
	c.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	const size = 300
	want := marshalFrame(t, &testpb.SimpleResponse{Payload: payload(size)})
	c.send(1, reqFields(pathUnary), marshalFrame(t, &testpb.SimpleRequest{ResponseSize: size}))
	window := 10
	var got []byte
	var trailers []hpack.HeaderField
	headers, grants, settingsGrant := false, 0, false
	for trailers == nil {
		if window == 0 {
			// Nothing is sent while the window is closed (checked the
			// first times, and then now and again).
			if grants < 3 || grants%5 == 0 {
				if ev, err := c.nextWithin(30 * time.Millisecond); !isTimeout(err) {
					t.Fatalf("with the window closed: %v, %v", ev, err)
				}
			}
			if !settingsGrant && len(got) > size/2 {
				// A larger SETTINGS_INITIAL_WINDOW_SIZE grows the open
				// stream's window by the difference (RFC 9113 §6.9.2).
				c.check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 50}))
				window += 40
				settingsGrant = true
			} else {
				inc := 1 + grants%13
				c.check(c.fr.WriteWindowUpdate(1, uint32(inc)))
				window += inc
				grants++
			}
		}
		ev := c.next()
		switch {
		case ev.typ == http2.FrameHeaders && !headers:
			headers = true
		case ev.typ == http2.FrameHeaders:
			if !ev.flags.Has(http2.FlagHeadersEndStream) {
				t.Fatalf("trailers without END_STREAM")
			}
			trailers = ev.fields
		case ev.typ == http2.FrameData && ev.stream == 1:
			if len(ev.data) > window {
				t.Fatalf("DATA of %d bytes with a window of %d", len(ev.data), window)
			}
			window -= len(ev.data)
			got = append(got, ev.data...)
		case ev.typ == http2.FrameSettings || ev.typ == http2.FrameWindowUpdate:
		default:
			t.Fatalf("unexpected %v", ev)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("body of %d bytes, want %d", len(got), len(want))
	}
	if s, _ := get(trailers, "grpc-status"); s != "0" {
		t.Fatalf("grpc-status %q", s)
	}
	if grants < 5 || !settingsGrant {
		t.Fatalf("the response completed after %d grants", grants)
	}
}

// TestProtoConnSendWindow: the server honors the connection's send
// window (65535 bytes until the client grants more) across streams.
func TestProtoConnSendWindow(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	c := dialRaw(t, addr)
	c.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	const size = 50000
	want := marshalFrame(t, &testpb.SimpleResponse{Payload: payload(size)})
	req := marshalFrame(t, &testpb.SimpleRequest{ResponseSize: size})
	c.send(1, reqFields(pathUnary), req)
	c.send(3, reqFields(pathUnary), req)
	window := 65535
	bodies := map[uint32][]byte{}
	ended := 0
	granted := false
	for ended < 2 {
		if window == 0 && !granted {
			// Quiet now that the window is closed.
			if ev, err := c.nextWithin(100 * time.Millisecond); !isTimeout(err) {
				t.Fatalf("with the connection's window closed: %v, %v", ev, err)
			}
			c.check(c.fr.WriteWindowUpdate(0, 1<<20))
			window += 1 << 20
			granted = true
		}
		ev := c.next()
		switch ev.typ {
		case http2.FrameData:
			if len(ev.data) > window {
				t.Fatalf("DATA of %d bytes with a connection window of %d", len(ev.data), window)
			}
			if len(ev.data) > 16384 {
				t.Fatalf("DATA of %d bytes, past the default SETTINGS_MAX_FRAME_SIZE", len(ev.data))
			}
			window -= len(ev.data)
			bodies[ev.stream] = append(bodies[ev.stream], ev.data...)
		case http2.FrameHeaders:
			if ev.flags.Has(http2.FlagHeadersEndStream) {
				if s, _ := get(ev.fields, "grpc-status"); s != "0" {
					t.Fatalf("stream %d: grpc-status %q", ev.stream, s)
				}
				ended++
			}
		case http2.FrameSettings, http2.FrameWindowUpdate:
		default:
			t.Fatalf("unexpected %v", ev)
		}
	}
	if !granted {
		t.Fatal("the responses completed without the connection's window closing")
	}
	for _, id := range []uint32{1, 3} {
		if !bytes.Equal(bodies[id], want) {
			t.Fatalf("stream %d: body of %d bytes, want %d", id, len(bodies[id]), len(want))
		}
	}
}

// TestProtoGracefulStop: GOAWAY NO_ERROR with the last stream, the call in
// flight finishes, new streams are refused, then the connection closes.
func TestProtoGracefulStop(t *testing.T) {
	svc := &testService{}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		entered <- struct{}{}
		<-release
		return &testpb.SimpleResponse{Username: "finished"}, nil
	}
	srv, addr := serveRaw(t, h2grpc.Options{}, svc)
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll() // before Stop, which waits for the handlers
	c := dialRaw(t, addr)
	c.handshake()
	checkOK(t, c.call(1, reqFields(pathEmpty), marshalFrame(t, &testpb.Empty{})), &testpb.Empty{})
	c.send(3, reqFields(pathUnary), marshalFrame(t, &testpb.SimpleRequest{}))
	select {
	case <-entered:
	case <-time.After(readTimeout):
		t.Fatal("the handler did not start")
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	for {
		ev := c.next()
		if ev.typ == http2.FrameSettings || ev.typ == http2.FrameWindowUpdate {
			continue
		}
		if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || ev.lastID != 3 {
			t.Fatalf("got %v, want GOAWAY NO_ERROR with last stream 3", ev)
		}
		break
	}
	// A stream opened after the GOAWAY is refused.
	if r := c.call(5, reqFields(pathEmpty), marshalFrame(t, &testpb.Empty{})); !r.rst || r.code != http2.ErrCodeRefusedStream {
		t.Fatalf("a stream after GOAWAY: %+v", r)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}
	releaseAll()
	checkOK(t, c.collect(3)[3], &testpb.SimpleResponse{Username: "finished"})
	c.expectClose()
	select {
	case <-stopped:
	case <-time.After(readTimeout):
		t.Fatal("GracefulStop did not return")
	}
}

// TestProtoGoHTTP2Client: Go's own HTTP/2 client (h2c with prior
// knowledge) makes gRPC calls.
func TestProtoGoHTTP2Client(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: readTimeout}
	post := func(path string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, got
	}
	check := func(resp *http.Response, got, want []byte, status string) {
		t.Helper()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("status %d, protocol %s", resp.StatusCode, resp.Proto)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/grpc" {
			t.Fatalf("content-type %q", ct)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("body of %d bytes %.20x, want %d bytes %.20x", len(got), got, len(want), want)
		}
		if s := resp.Trailer.Get("Grpc-Status"); s != status {
			t.Fatalf("grpc-status %q, want %q (trailer %v, header %v)", s, status, resp.Trailer, resp.Header)
		}
	}
	resp, got := post(pathEmpty, marshalFrame(t, &testpb.Empty{}))
	check(resp, got, marshalFrame(t, &testpb.Empty{}), "0")
	// Past the windows both ways: Go's client grants the server more
	// window as it reads.
	const n = 300000
	resp, got = post(pathUnary, marshalFrame(t, &testpb.SimpleRequest{ResponseSize: n, Payload: payload(n)}))
	check(resp, got, marshalFrame(t, &testpb.SimpleResponse{Payload: payload(n)}), "0")
	// An error is a trailers-only response: the status is in the headers.
	resp, _ = post("/no.Such/Method", marshalFrame(t, &testpb.Empty{}))
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "12" {
		t.Fatalf("unknown method: %d, header %v", resp.StatusCode, resp.Header)
	}
}
