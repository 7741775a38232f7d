package h2grpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// pipeListener is an in-memory net.Listener: dial hands the server one
// end of a net.Pipe.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// dial returns the client's end of a new connection, and the server's,
// which reports when the server closes it.
func (l *pipeListener) dial() (net.Conn, *trackedConn, error) {
	client, server := net.Pipe()
	sc := &trackedConn{Conn: server, closed: make(chan struct{})}
	select {
	case l.conns <- sc:
		return client, sc, nil
	case <-l.done:
		client.Close()
		server.Close()
		return nil, nil, net.ErrClosed
	}
}

// trackedConn is a net.Conn whose closed channel is closed with it.
type trackedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// fuzzService answers what grpc-go's interop service would, with the
// sizes capped: a fuzzed request must not make a handler allocate what it
// asks for.
type fuzzService struct {
	testpb.UnimplementedTestServiceServer
}

const fuzzMaxPayload = 2 << 10

func fuzzPayload(n int32) *testpb.Payload {
	return payload(min(max(int(n), 0), fuzzMaxPayload))
}

func (fuzzService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (fuzzService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: fuzzPayload(req.GetResponseSize())}, nil
}

func (fuzzService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	for i, p := range req.GetResponseParameters() {
		if i == 4 {
			break
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: fuzzPayload(p.GetSize())}); err != nil {
			return err
		}
	}
	return nil
}

// FullDuplexCall answers each request as StreamingOutputCall does.
func (s fuzzService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := s.StreamingOutputCall(req, stream); err != nil {
			return err
		}
	}
}

// serverGoroutines returns the stacks of the goroutines, other than the
// caller's, running the server's code or the fuzz target's.
func serverGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i > 0 && (strings.Contains(g, "/internal/transport/h2grpc.") || strings.Contains(g, "/internal/h2grpc_test.FuzzConn")) {
			out = append(out, g)
		}
	}
	return out
}

// fuzzSentinel is the PING the fuzz target sends after an input: its
// acknowledgement says the server has read the whole input.
var fuzzSentinel = [8]byte{'f', 'u', 'z', 'z', 'd', 'o', 'n', 'e'}

// fuzzSeeds returns well-formed frame sequences, each what a client
// writes after the preface.
func fuzzSeeds(tb testing.TB) [][]byte {
	type seed func(fr *http2.Framer, block func(fields ...string) []byte) error
	msg := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		return grpcFrame(0, b)
	}
	empty := msg(&testpb.Empty{})
	unary := msg(&testpb.SimpleRequest{ResponseSize: 300, Payload: payload(50)})
	streaming := msg(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 10}, {Size: 1000}, {Size: 0}}})
	seeds := []seed{
		// SETTINGS alone, with the ACK of the server's.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20},
				http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 15},
				http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
			return fr.WriteSettingsAck()
		},
		// A unary call.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields(pathEmpty)...), EndHeaders: true})
			return fr.WriteData(1, true, empty)
		},
		// Two calls, the second's header block in HEADERS and
		// CONTINUATION, with a timeout.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields(pathUnary)...), EndHeaders: true})
			fr.WriteData(1, true, unary)
			b := block(reqFields(pathUnary, "grpc-timeout", "1S")...)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:7]})
			fr.WriteContinuation(3, true, b[7:])
			return fr.WriteData(3, true, unary)
		},
		// PING, and a PING ACK.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
			return fr.WritePing(true, [8]byte{})
		},
		// A stream reset before its request is complete, and one after.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields(pathUnary)...), EndHeaders: true})
			fr.WriteRSTStream(1, http2.ErrCodeCancel)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(reqFields(pathUnary)...), EndHeaders: true})
			fr.WriteData(3, true, unary)
			return fr.WriteRSTStream(3, http2.ErrCodeCancel)
		},
		// A small send window, granted more by WINDOW_UPDATE and SETTINGS.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields(pathUnary)...), EndHeaders: true})
			fr.WriteData(1, true, unary)
			fr.WriteWindowUpdate(1, 100)
			fr.WriteWindowUpdate(0, 1000)
			return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 500})
		},
		// Server streaming, padded and prioritized frames, a PRIORITY
		// frame and trailers from the client.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			fr.WritePriority(1, http2.PriorityParam{StreamDep: 0, Weight: 7})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields("/grpc.testing.TestService/StreamingOutputCall")...),
				EndHeaders: true, PadLength: 5, Priority: http2.PriorityParam{StreamDep: 0, Weight: 20}})
			fr.WriteDataPadded(1, false, streaming, make([]byte, 3))
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("x-trailer", "t"), EndHeaders: true, EndStream: true})
		},
		// Requests the server rejects: GET, a bad content-type, an unknown
		// method, gzip, a missing :path.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			for i, fields := range [][]string{
				reqFields(pathEmpty, ":method", "GET"),
				reqFields(pathEmpty, "content-type", "text/plain"),
				reqFields("/no.Such/Method"),
				reqFields(pathEmpty, "grpc-encoding", "gzip"),
				reqFields(pathEmpty, ":path", omit),
			} {
				id := uint32(2*i + 1)
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(fields...), EndHeaders: true})
				fr.WriteData(id, true, empty)
			}
			return nil
		},
		// Bidi calls: two messages split across DATA frames (padded), one
		// ended by trailers, one reset, one whose message is truncated,
		// one too large.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			two := append(bytes.Clone(streaming), streaming...)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields(pathDuplex)...), EndHeaders: true})
			fr.WriteData(1, false, two[:3])
			fr.WriteDataPadded(1, false, two[3:len(streaming)+2], make([]byte, 2))
			fr.WriteData(1, false, two[len(streaming)+2:])
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("x-trailer", "t"), EndHeaders: true, EndStream: true})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(reqFields(pathDuplex)...), EndHeaders: true})
			fr.WriteData(3, false, streaming)
			fr.WriteRSTStream(3, http2.ErrCodeCancel)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block(reqFields(pathDuplex)...), EndHeaders: true})
			fr.WriteData(5, true, streaming[:len(streaming)-1])
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: block(reqFields(pathDuplex)...), EndHeaders: true})
			return fr.WriteData(7, false, []byte{0, 0, 1, 0, 0, 1, 2, 3})
		},
		// The client's GOAWAY.
		func(fr *http2.Framer, block func(...string) []byte) error {
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(reqFields(pathEmpty)...), EndHeaders: true, EndStream: false})
			fr.WriteData(1, true, empty)
			return fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye"))
		},
	}
	var out [][]byte
	for _, s := range seeds {
		var buf, hbuf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		enc := hpack.NewEncoder(&hbuf)
		block := func(fields ...string) []byte {
			hbuf.Reset()
			for i := 0; i < len(fields); i += 2 {
				enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
			}
			return bytes.Clone(hbuf.Bytes())
		}
		if err := s(fr, block); err != nil {
			tb.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return append(out, nil)
}

// FuzzConn writes the client preface and then the fuzzer's bytes to a
// connection, reading what the server answers, which must be well-formed
// HTTP/2. The server must not panic, must keep reading, must close the
// connection once the client has, and must leave no goroutine behind
// after Stop.
func FuzzConn(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	srv := h2grpc.NewServer(h2grpc.Options{MaxConcurrentStreams: 16, MaxRecvMsgSize: 4 << 10, MaxHeaderListSize: 4 << 10, Workers: 4})
	testpb.RegisterTestServiceServer(srv, fuzzService{})
	lis := newPipeListener()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	f.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			f.Errorf("Serve: %v", err)
		}
		// A connection's writer goroutine ends just after Stop returns.
		deadline := time.Now().Add(5 * time.Second)
		left := serverGoroutines()
		for len(left) > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			left = serverGoroutines()
		}
		if len(left) > 0 {
			f.Errorf("%d goroutines left after Stop:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})

	f.Fuzz(func(t *testing.T, data []byte) {
		nc, sc, err := lis.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// Read the server's frames, checking them, and note the sentinel
		// PING's acknowledgement.
		acked, activity, drained := make(chan struct{}), make(chan struct{}, 1), make(chan error, 1)
		go func() {
			fr := http2.NewFramer(nil, nc)
			fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			var err error
			for {
				var fm http2.Frame
				if fm, err = fr.ReadFrame(); err != nil {
					break
				}
				select {
				case activity <- struct{}{}:
				default:
				}
				if p, ok := fm.(*http2.PingFrame); ok && p.IsAck() && p.Data == fuzzSentinel {
					select {
					case <-acked: // the input held the sentinel too
					default:
						close(acked)
					}
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				err = nil
			}
			io.Copy(io.Discard, nc)
			drained <- err
		}()
		sentinel := make([]byte, 0, 17)
		sentinel = append(sentinel, 0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0)
		sentinel = append(sentinel, fuzzSentinel[:]...)
		nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		for _, b := range [][]byte{[]byte(http2.ClientPreface), data, sentinel} {
			if _, err := nc.Write(b); err != nil {
				if isTimeout(err) {
					t.Fatal("the server stopped reading")
				}
				break // the server closed the connection
			}
		}
		// Give the server a moment to answer: until it has read the
		// sentinel (unless the input left a frame unfinished, which the
		// sentinel then is part of), then until its handlers' answers stop
		// coming, or it ends the connection.
		wait := time.NewTimer(2 * time.Millisecond)
		select {
		case <-acked:
			wait.Reset(50 * time.Millisecond)
		quiet:
			for {
				select {
				case <-activity:
				case <-sc.closed:
					break quiet
				case <-wait.C:
					break quiet
				case <-time.After(time.Millisecond):
					break quiet
				}
			}
		case <-sc.closed:
		case <-wait.C:
		}
		wait.Stop()
		nc.Close()
		if err := <-drained; err != nil {
			t.Errorf("reading the server's frames: %v", err)
		}
		select {
		case <-sc.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not close its end of the connection")
		}
	})
}
