package h2grpc_test

// Methods that stream from the client (bidi.go): each message delivered
// as it arrives, with the bounds of every call, a message at a time.

import (
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

const pathDuplex = "/grpc.testing.TestService/FullDuplexCall"

// duplexReq asks for one answer of size bytes, with a payload of pad
// bytes.
func duplexReq(size, pad int) *testpb.StreamingOutputCallRequest {
	return &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: int32(size)}}, Payload: payload(pad)}
}

// TestBidi: each request of a bidi call reaches the handler as it is
// sent, before the next is (the client waits for each answer), and the
// client's end of the stream ends the handler's reading (io.EOF).
func TestBidi(t *testing.T) {
	f := start(t, h2grpc.Options{})
	stream, err := f.client.FullDuplexCall(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := stream.Send(duplexReq(10*i, 100)); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if len(resp.GetPayload().GetBody()) != 10*i {
			t.Fatalf("answer %d: %d bytes, want %d", i, len(resp.GetPayload().GetBody()), 10*i)
		}
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

// TestBidiMessageTooLarge: a bidi call's message fits its stream's
// window (65530 bytes), or the call ends RESOURCE_EXHAUSTED; the
// connection still serves.
func TestBidiMessageTooLarge(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	stream, err := f.client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Just under: served.
	if err := stream.Send(duplexReq(1, 65000)); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("a message of 65 KB: %v", err)
	}
	stream.Send(duplexReq(1, 70000))
	if _, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a message of 70 KB: %v, want ResourceExhausted", err)
	}
	if _, err := f.client.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatalf("the connection after: %v", err)
	}
}

// TestBidiStreamLimit: at most 8 bidi calls are open on a connection;
// the next is answered RESOURCE_EXHAUSTED, and one ending makes room.
func TestBidiStreamLimit(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	var open []testpb.TestService_FullDuplexCallClient
	call := func() (testpb.TestService_FullDuplexCallClient, error) {
		stream, err := f.client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stream.Send(duplexReq(1, 0))
		_, err = stream.Recv()
		return stream, err
	}
	for i := range 8 {
		stream, err := call()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		open = append(open, stream)
	}
	if _, err := call(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 9th call: %v, want ResourceExhausted", err)
	}
	open[0].CloseSend()
	if _, err := open[0].Recv(); err != io.EOF {
		t.Fatal(err)
	}
	if _, err := call(); err != nil {
		t.Fatalf("a call after one ended: %v", err)
	}
	if _, err := f.client.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}

// writeMsg sends frame on stream id in DATA frames of at most 16 KiB.
func (c *rawClient) writeMsg(id uint32, frame []byte, end bool) {
	c.t.Helper()
	for len(frame) > 0 {
		n := min(len(frame), 16384)
		c.check(c.fr.WriteData(id, end && n == len(frame), frame[:n]))
		frame = frame[n:]
	}
}

// windowUpdate reads until a WINDOW_UPDATE on stream id.
func (c *rawClient) windowUpdate(id uint32) event {
	c.t.Helper()
	for {
		ev := c.next()
		if ev.typ == http2.FrameWindowUpdate && ev.stream == id {
			return ev
		}
		if ev.typ != http2.FrameWindowUpdate && ev.typ != http2.FrameSettings && ev.typ != http2.FramePing {
			c.t.Fatalf("waiting for a WINDOW_UPDATE on stream %d: %v", id, ev)
		}
	}
}

// TestBidiFlowControl: a bidi call's message gives its credit back once
// the handler has taken it, not on receipt: a client may send a window's
// worth more after each message taken, and a byte past the window of a
// handler that takes nothing is a FLOW_CONTROL_ERROR.
func TestBidiFlowControl(t *testing.T) {
	msg := marshalFrame(t, &testpb.StreamingOutputCallRequest{Payload: payload(65000)})
	t.Run("taken", func(t *testing.T) {
		_, addr := serveRaw(t, h2grpc.Options{}, &testService{})
		c := dialRaw(t, addr)
		c.handshake()
		c.writeBlock(1, c.block(reqFields(pathDuplex)...), false)
		for i := range 4 {
			c.writeMsg(1, msg, false)
			if ev := c.windowUpdate(1); ev.incr != uint32(len(msg)) {
				t.Fatalf("message %d: WINDOW_UPDATE of %d, want %d", i, ev.incr, len(msg))
			}
		}
	})
	t.Run("not taken", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		_, addr := serveRaw(t, h2grpc.Options{}, &testService{duplex: func(testpb.TestService_FullDuplexCallServer) error {
			<-release
			return nil
		}})
		c := dialRaw(t, addr)
		c.handshake()
		c.writeBlock(1, c.block(reqFields(pathDuplex)...), false)
		c.writeMsg(1, msg, false)
		c.writeMsg(1, make([]byte, 65535-len(msg)+1), false)
		c.expectGoAway(http2.ErrCodeFlowControl, 1)
	})
}

// TestBidiStalled: a bidi call must progress a message at a time: its
// connection ends (GOAWAY NO_ERROR "stalled_request") when a message
// stops mid-way, or when no next message (nor the stream's end) comes,
// for RequestTimeout.
func TestBidiStalled(t *testing.T) {
	for name, sent := range map[string][]byte{
		"mid-message":  marshalFrame(t, duplexReq(0, 100))[:20],
		"next message": marshalFrame(t, duplexReq(0, 100)),
	} {
		t.Run(name, func(t *testing.T) {
			_, addr := serveRaw(t, h2grpc.Options{StreamLimits: h2grpc.StreamLimits{RequestTimeout: 100 * time.Millisecond}}, &testService{})
			c := dialRaw(t, addr)
			c.handshake()
			c.writeBlock(1, c.block(reqFields(pathDuplex)...), false)
			c.writeMsg(1, sent, false)
			ev := c.goAwayWithin(readTimeout)
			if ev.code != http2.ErrCodeNo || string(ev.data) != "stalled_request" || ev.lastID != 1 {
				t.Fatalf("got %v, want GOAWAY NO_ERROR last 1 stalled_request", ev)
			}
			c.expectClose()
			served(t, addr)
		})
	}
}
