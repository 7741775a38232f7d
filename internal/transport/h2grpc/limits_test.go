package h2grpc_test

// Tests of what one connection can make the server hold: request bytes bounded by the receive windows, credit given back
// only as handlers consume, responses bounded by the send queue.

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// heapInUse returns the bytes of live heap objects, after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// flowClient sends the same request message on many streams, keeping to
// the windows the server grants, as a client that plays by HTTP/2's rules
// but never lets up.
type flowClient struct {
	c       *rawClient
	msg     []byte
	connWin int64
	initWin int64
	win     map[uint32]int64 // each open stream's send window
	sent    map[uint32]int   // the bytes of msg sent on each stream
	ids     []uint32         // the streams still sending
	total   int64            // DATA bytes sent
	ended   map[uint32]*response
	refused map[uint32]bool
	pings   uint64
}

// newFlowClient does the handshake, taking note of the server's windows.
func newFlowClient(c *rawClient, msg []byte) *flowClient {
	f := &flowClient{c: c, msg: msg, connWin: 65535, initWin: 65535, win: map[uint32]int64{}, sent: map[uint32]int{},
		ended: map[uint32]*response{}, refused: map[uint32]bool{}}
	c.preface()
	c.check(c.fr.WriteSettings())
	for {
		ev := c.next()
		switch {
		case ev.typ == http2.FrameSettings && ev.flags.Has(http2.FlagSettingsAck):
			return f
		case ev.typ == http2.FrameSettings:
			for _, s := range ev.settings {
				if s.ID == http2.SettingInitialWindowSize {
					f.initWin = int64(s.Val)
				}
			}
			c.check(c.fr.WriteSettingsAck())
		case ev.typ == http2.FrameWindowUpdate && ev.stream == 0:
			f.connWin += int64(ev.incr)
		default:
			c.t.Fatalf("handshake: unexpected %v", ev)
		}
	}
}

// open opens stream id with a request's headers.
func (f *flowClient) open(id uint32) {
	f.c.writeBlock(id, f.c.block(reqFields(pathUnary)...), false)
	f.win[id] = f.initWin
	f.ids = append(f.ids, id)
}

// pump sends what the windows allow, a frame a stream in turn, and
// returns the bytes it sent.
func (f *flowClient) pump() int64 {
	var sent int64
	for progress := true; progress && f.connWin > 0; {
		progress = false
		for i := 0; i < len(f.ids) && f.connWin > 0; i++ {
			id := f.ids[i]
			off := f.sent[id]
			n := int(min(int64(len(f.msg)-off), 16384, f.connWin, f.win[id]))
			if n <= 0 {
				continue
			}
			end := off+n == len(f.msg)
			f.c.check(f.c.fr.WriteData(id, end, f.msg[off:off+n]))
			f.sent[id] += n
			f.win[id] -= int64(n)
			f.connWin -= int64(n)
			sent += int64(n)
			progress = true
			if end {
				f.ids = append(f.ids[:i], f.ids[i+1:]...)
				i--
			}
		}
	}
	f.total += sent
	return sent
}

// sync sends a PING and reads until its acknowledgement, which comes after
// the server's answers to everything sent before it, and reports whether
// the server granted any credit.
func (f *flowClient) sync() bool {
	c := f.c
	f.pings++
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], f.pings)
	c.check(c.fr.WritePing(false, seq))
	granted := false
	for {
		ev := c.next()
		switch ev.typ {
		case http2.FramePing:
			if ev.flags.Has(http2.FlagPingAck) && string(ev.data) == string(seq[:]) {
				return granted
			}
		case http2.FrameWindowUpdate:
			if ev.stream == 0 {
				f.connWin += int64(ev.incr)
			} else {
				f.win[ev.stream] += int64(ev.incr)
			}
			granted = true
		case http2.FrameSettings:
			if !ev.flags.Has(http2.FlagSettingsAck) {
				c.check(c.fr.WriteSettingsAck())
			}
		case http2.FrameHeaders:
			r := f.ended[ev.stream]
			if r == nil {
				r = &response{headers: ev.fields, headersEnded: ev.flags.Has(http2.FlagHeadersEndStream)}
				f.ended[ev.stream] = r
			} else {
				r.trailers = ev.fields
			}
		case http2.FrameData:
			if r := f.ended[ev.stream]; r != nil {
				r.data = append(r.data, ev.data...)
			}
		case http2.FrameRSTStream:
			if ev.code != http2.ErrCodeRefusedStream {
				c.t.Fatalf("unexpected %v", ev)
			}
			f.refused[ev.stream] = true
		default:
			c.t.Fatalf("unexpected %v", ev)
		}
	}
}

// stuck sends until the server grants no more.
func (f *flowClient) stuck() {
	for {
		sent := f.pump()
		if !f.sync() && sent == 0 {
			return
		}
	}
}

// TestRecvBound is the receive-window attack: one connection opens
// as many streams as it may and sends 512 MiB of requests whose handlers
// block. The server takes no more than its connection's window (32 MiB):
// the client, keeping to HTTP/2's flow control, gets stuck, and the
// server's heap grows by less than 64 MiB (it took all 512 MiB, and held
// it, when credit came back on receipt). Once the handlers return, their
// credit comes back and every call completes.
func TestRecvBound(t *testing.T) {
	svc := &testService{}
	release := make(chan struct{})
	var entered atomic.Int32
	svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		entered.Add(1)
		<-release
		return &testpb.SimpleResponse{Username: "done"}, nil
	}
	_, addr := serveRaw(t, h2grpc.Options{}, svc)
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll() // before Stop, which waits for the handlers

	const streams = 256 // the default MaxConcurrentStreams
	msg := marshalFrame(t, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 2<<20)}})
	attempted := int64(streams * len(msg))
	before := heapInUse()

	c := dialRaw(t, addr)
	f := newFlowClient(c, msg)
	for i := range streams {
		f.open(uint32(2*i + 1))
	}
	f.stuck()
	grew := heapInUse() - before
	t.Logf("sent %d of %d bytes (%d calls complete, %d handlers running); the heap grew by %d bytes",
		f.total, attempted, streams-len(f.ids), entered.Load(), grew)
	if attempted < 512<<20 {
		t.Fatalf("attempted only %d bytes", attempted)
	}
	if f.total > 32<<20 {
		t.Errorf("the server took %d bytes, more than its connection's window (32 MiB)", f.total)
	}
	if grew > 64<<20 {
		t.Errorf("the server's heap grew by %d bytes, want under 64 MiB", grew)
	}
	if len(f.ended) != 0 {
		t.Fatalf("%d calls answered with their handlers blocked", len(f.ended))
	}
	// Large messages are granted the rest of their credit from the
	// connection's reserve: some are whole and their handlers run.
	complete := int32(streams - len(f.ids))
	for deadline := time.Now().Add(readTimeout); entered.Load() < complete && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := entered.Load(); n == 0 || n != complete {
		t.Errorf("%d handlers run, %d requests complete", n, complete)
	}

	// MaxConcurrentStreams holds: one stream more is refused.
	f.c.writeBlock(2*streams+1, c.block(reqFields(pathUnary)...), true)
	f.sync()
	if !f.refused[2*streams+1] {
		t.Errorf("stream %d, past MaxConcurrentStreams, was not refused", 2*streams+1)
	}

	// Handlers that return give their requests' credit back: calls go on
	// completing, through the connection's window over again.
	releaseAll()
	for len(f.ended) < 24 {
		if f.pump() == 0 && !f.sync() && len(f.ended) < 24 {
			f.await()
		}
	}
	// Streams reset mid-request give theirs back at once.
	sending := len(f.ids)
	for _, id := range f.ids {
		c.check(c.fr.WriteRSTStream(id, http2.ErrCodeCancel))
	}
	f.ids = nil
	for len(f.ended) < streams-sending {
		if !f.sync() && len(f.ended) < streams-sending {
			f.await()
		}
	}
	f.sync()
	if f.connWin < 32<<20-64<<10 {
		t.Errorf("with no call left, the connection's window is %d, want 32 MiB less at most 64 KiB not yet given back", f.connWin)
	}
	for id, r := range f.ended {
		if r.trailers == nil {
			t.Fatalf("stream %d: no trailers", id)
		}
		checkOK(t, r, &testpb.SimpleResponse{Username: "done"})
	}
	t.Logf("%d calls answered, %d reset; %d bytes sent", len(f.ended), sending, f.total)
	// The connection still serves.
	checkOK(t, c.call(2*streams+3, reqFields(pathEmpty), marshalFrame(t, &testpb.Empty{})), &testpb.Empty{})
}

// await reads the next frame, which a handler's end sends.
func (f *flowClient) await() {
	f.c.t.Helper()
	ev, err := f.c.nextWithin(readTimeout)
	if err != nil {
		f.c.t.Fatalf("%d calls answered, then: %v", len(f.ended), err)
	}
	f.apply(ev)
}

// apply takes an event read outside sync.
func (f *flowClient) apply(ev event) {
	switch ev.typ {
	case http2.FrameWindowUpdate:
		if ev.stream == 0 {
			f.connWin += int64(ev.incr)
		} else {
			f.win[ev.stream] += int64(ev.incr)
		}
	case http2.FrameHeaders:
		r := f.ended[ev.stream]
		if r == nil {
			f.ended[ev.stream] = &response{headers: ev.fields, headersEnded: ev.flags.Has(http2.FlagHeadersEndStream)}
		} else {
			r.trailers = ev.fields
		}
	case http2.FrameData:
		if r := f.ended[ev.stream]; r != nil {
			r.data = append(r.data, ev.data...)
		}
	case http2.FramePing, http2.FrameSettings:
		f.c.t.Fatalf("unexpected %v outside sync", ev)
	default:
		f.c.t.Fatalf("unexpected %v", ev)
	}
}

// TestRecvWindowExceeded: DATA past a stream's window, the initial one or
// the one granted to a large message, is a connection error
// (FLOW_CONTROL_ERROR).
func TestRecvWindowExceeded(t *testing.T) {
	// Two streams, and a reserve for one message of the largest size.
	_, addr := serveRaw(t, h2grpc.Options{MaxConcurrentStreams: 2, InitialConnWindowSize: 1}, &testService{})

	// Past the initial window: 65536 bytes of a message announcing more,
	// on a connection whose reserve another message has taken.
	c := dialRaw(t, addr)
	c.handshake()
	c.writeBlock(1, c.block(reqFields(pathUnary)...), false)
	c.check(c.fr.WriteData(1, false, []byte{0, 0, 0x40, 0, 0})) // 4 MiB: granted
	c.writeBlock(3, c.block(reqFields(pathUnary)...), false)
	big := grpcFrame(0, make([]byte, 4<<20))
	big = big[:65536]
	for off := 0; off < 65535; off += 16384 {
		c.check(c.fr.WriteData(3, false, big[off:min(off+16384, 65535)]))
	}
	c.check(c.fr.WriteData(3, false, big[65535:]))
	c.expectGoAway(http2.ErrCodeFlowControl, 3)

	// Past a message's grant: the server grants a stream the rest of a
	// message of 100000 bytes, and not a byte more.
	c = dialRaw(t, addr)
	c.handshake()
	c.writeBlock(1, c.block(reqFields(pathUnary)...), false)
	msg := grpcFrame(0, make([]byte, 100000))
	c.check(c.fr.WriteData(1, false, msg[:16384]))
	for {
		ev := c.next()
		if ev.typ == http2.FrameWindowUpdate && ev.stream == 1 {
			if ev.incr != 100005-65535 {
				t.Fatalf("stream WINDOW_UPDATE of %d, want %d", ev.incr, 100005-65535)
			}
			break
		}
		if ev.typ != http2.FrameWindowUpdate && ev.typ != http2.FrameSettings {
			t.Fatalf("unexpected %v", ev)
		}
	}
	for off := 16384; off < len(msg); off += 16384 {
		c.check(c.fr.WriteData(1, false, msg[off:min(off+16384, len(msg))]))
	}
	c.check(c.fr.WriteData(1, true, []byte{0}))
	c.expectGoAway(http2.ErrCodeFlowControl, 1)
}

// TestHPACKTableBound: a dynamic table larger than the 4096 bytes
// HTTP/2's SETTINGS_HEADER_TABLE_SIZE allows (the server does not raise
// it) is a COMPRESSION_ERROR.
func TestHPACKTableBound(t *testing.T) {
	_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
	c := dialRaw(t, addr)
	c.handshake()
	// A dynamic table size update to 8192 (RFC 7541 §6.3), then a field.
	block := append([]byte{0x3f, 0xe1, 0x3f}, c.block(reqFields(pathEmpty)...)...)
	c.check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true, EndStream: true}))
	c.expectGoAway(http2.ErrCodeCompression, -1)
}

// TestSendQueueBound: a client that grants the largest windows and then
// reads nothing. Eight server-streaming handlers sending 512 MiB each wait
// for room in the send queue (MaxSendQueue, 4 MiB), or for the write in
// progress, instead of the server buffering what the client's windows
// allow. The connection is a net.Pipe, so no kernel buffer takes any of
// it.
func TestSendQueueBound(t *testing.T) {
	srv := h2grpc.NewServer(h2grpc.Options{})
	testpb.RegisterTestServiceServer(srv, &testService{})
	lis := newPipeListener()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	req := &testpb.StreamingOutputCallRequest{}
	for range 512 {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: 1 << 20})
	}
	body := marshalFrame(t, req)
	before := heapInUse()

	nc, _, err := lis.dial()
	if err != nil {
		t.Fatal(err)
	}
	c := newRawClient(t, nc)
	c.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	c.check(c.fr.WriteWindowUpdate(0, 1<<31-1-65535))
	const calls = 8
	for i := range calls {
		c.send(uint32(2*i+1), reqFields("/grpc.testing.TestService/StreamingOutputCall"), body)
	}
	// From here on the client reads nothing. Wait until every handler is
	// blocked: writing (on the pipe) or waiting for room in the queue.
	blocked := func() (writing, waiting int) {
		for _, g := range serverGoroutines() {
			if !strings.Contains(g, "StreamingOutputCall") {
				continue
			}
			switch header, _, _ := strings.Cut(g, "\n"); {
			case strings.Contains(header, "[select") && strings.Contains(g, "(*conn).flush"):
				writing++
			case strings.Contains(header, "[sync.Cond.Wait") && strings.Contains(g, "(*conn).appendDataLocked"):
				waiting++
			}
		}
		return writing, waiting
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		writing, waiting := blocked()
		if writing+waiting == calls {
			t.Logf("%d handlers writing, %d waiting for room", writing, waiting)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("of %d handlers, %d are writing and %d waiting for room", calls, writing, waiting)
		}
		time.Sleep(5 * time.Millisecond)
	}
	grew := heapInUse() - before
	t.Logf("with the handlers blocked, the heap grew by %d bytes", grew)
	if grew > 64<<20 {
		t.Errorf("the heap grew by %d bytes, want under 64 MiB", grew)
	}
	nc.Close() // the handler's Send fails, and the connection ends
}

// TestLargeMessages: with grpc-go's client, a request of MaxRecvMsgSize
// and many large ones at once on one connection, each waiting for the
// rest of its credit from the connection's reserve, which comes back as
// handlers return: with the default windows, and with the least a
// connection may have (a reserve of one message of the largest size, and
// four streams).
func TestLargeMessages(t *testing.T) {
	largest := &testpb.SimpleRequest{Payload: &testpb.Payload{}}
	for n := 4<<20 - 16; proto.Size(largest) < 4<<20; n++ {
		largest.Payload.Body = make([]byte, n)
	}
	tooLarge := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, len(largest.Payload.Body)+1)}}
	for _, o := range []h2grpc.Options{{}, {MaxConcurrentStreams: 4, InitialConnWindowSize: 1}} {
		f := start(t, o)
		ctx := ctxT(t)
		if _, err := f.client.UnaryCall(ctx, largest); err != nil {
			t.Fatalf("%+v: a message of %d bytes: %v", o, proto.Size(largest), err)
		}
		if _, err := f.client.UnaryCall(ctx, tooLarge); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%+v: a message of %d bytes: %v, want ResourceExhausted", o, proto.Size(tooLarge), err)
		}
		// 24 MiB at once, in calls of 1 MiB, and small ones.
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 1 << 20
				if i%4 == 3 {
					n = 100
				}
				resp, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 10, Payload: &testpb.Payload{Body: make([]byte, n)}})
				if err == nil && len(resp.GetPayload().GetBody()) != 10 {
					err = status.Error(codes.Internal, "wrong response")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%+v: %v", o, err)
		}
	}
}
