package h2grpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// testService is grpc-go's interop TestService, with hooks the tests set.
type testService struct {
	testpb.UnimplementedTestServiceServer
	unary  func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error)
	duplex func(stream testpb.TestService_FullDuplexCallServer) error
	calls  atomic.Int64
}

// FullDuplexCall answers each request, as it comes, with a message per
// response parameter; a hook may decide instead.
func (s *testService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	s.calls.Add(1)
	if s.duplex != nil {
		return s.duplex(stream)
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		for _, p := range req.GetResponseParameters() {
			if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: payload(int(p.GetSize()))}); err != nil {
				return err
			}
		}
	}
}

func (s *testService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	s.calls.Add(1)
	return &testpb.Empty{}, nil
}

// UnaryCall answers with a payload of the size asked for, and the status
// asked for; a hook may decide instead.
func (s *testService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.calls.Add(1)
	if s.unary != nil {
		return s.unary(ctx, req)
	}
	if st := req.GetResponseStatus(); st != nil {
		return nil, status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return &testpb.SimpleResponse{Payload: payload(int(req.GetResponseSize()))}, nil
}

// StreamingOutputCall sends one message per response parameter, with
// header and trailer metadata.
func (s *testService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	if err := stream.SetHeader(metadata.Pairs("h1", "v1")); err != nil {
		return err
	}
	stream.SetTrailer(metadata.Pairs("t1", "v1", "t-bin", "\x00\x01"))
	for _, p := range req.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: payload(int(p.GetSize()))}); err != nil {
			return err
		}
	}
	if st := req.GetResponseStatus(); st != nil {
		return status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return nil
}

func payload(n int) *testpb.Payload {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return &testpb.Payload{Body: b}
}

type fixture struct {
	srv    *h2grpc.Server
	svc    *testService
	health *health.Server
	addr   string
	conn   *grpc.ClientConn
	client testpb.TestServiceClient
	served chan error
}

// start serves a testService and a health service on loopback and dials
// them with grpc-go.
func start(t *testing.T, o h2grpc.Options) *fixture {
	t.Helper()
	f := &fixture{srv: h2grpc.NewServer(o), svc: &testService{}, health: health.NewServer(), served: make(chan error, 1)}
	testpb.RegisterTestServiceServer(f.srv, f.svc)
	healthpb.RegisterHealthServer(f.srv, f.health)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	go func() { f.served <- f.srv.Serve(lis) }()
	f.conn, err = grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	f.client = testpb.NewTestServiceClient(f.conn)
	t.Cleanup(func() {
		f.conn.Close()
		f.srv.Stop()
		if err := <-f.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestUnary(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	if _, err := f.client.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	// Sizes around the frame size (16 KiB) and past the stream window
	// (64 KiB) both ways.
	for _, n := range []int{0, 1, 16384 - 5, 16384, 70000, 1 << 20} {
		resp, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: int32(n), Payload: payload(n)})
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if !bytes.Equal(resp.GetPayload().GetBody(), payload(n).GetBody()) {
			t.Fatalf("size %d: payload differs", n)
		}
	}
}

// TestConcurrent runs many calls at once on one connection, some larger
// than the windows, so that flow control waits interleave with small
// calls.
func TestConcurrent(t *testing.T) {
	f := start(t, h2grpc.Options{Workers: 4})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				n := (g*31 + i*17) % 200
				if g%16 == 0 && i%10 == 0 {
					n = 200000
				}
				resp, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: int32(n), Payload: payload(n / 2)})
				if err != nil {
					errs <- err
					return
				}
				if len(resp.GetPayload().GetBody()) != n {
					errs <- errors.New("wrong payload size")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := f.svc.calls.Load(); got != 64*30 {
		t.Fatalf("calls = %d, want %d", got, 64*30)
	}
}

func TestStatus(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	msg := "naïve 100% \n wrong"
	_, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.FailedPrecondition), Message: msg}})
	if s := status.Convert(err); s.Code() != codes.FailedPrecondition || s.Message() != msg {
		t.Fatalf("got %v, want FailedPrecondition %q", err, msg)
	}

	// Details travel in grpc-status-details-bin.
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		s, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{})
		return nil, s.Err()
	}
	_, err = f.client.UnaryCall(ctx, &testpb.SimpleRequest{})
	s := status.Convert(err)
	if s.Code() != codes.ResourceExhausted || len(s.Details()) != 1 {
		t.Fatalf("got %v with details %v", err, s.Details())
	}
	if _, ok := s.Details()[0].(*errdetails.RetryInfo); !ok {
		t.Fatalf("detail %T", s.Details()[0])
	}

	// A plain error is UNKNOWN, a context error its code.
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		return nil, errors.New("plain")
	}
	_, err = f.client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if s := status.Convert(err); s.Code() != codes.Unknown || s.Message() != "plain" {
		t.Fatalf("got %v", err)
	}
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		return nil, context.DeadlineExceeded
	}
	_, err = f.client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v", err)
	}
}

func TestUnimplemented(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	if _, err := f.client.UnimplementedCall(ctx, &testpb.Empty{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("UnimplementedCall: %v", err)
	}
	err := f.conn.Invoke(ctx, "/no.Such/Method", &testpb.Empty{}, &testpb.Empty{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "/no.Such/Method") {
		t.Fatalf("unknown method: %v", err)
	}
	// A method that streams from the client, not implemented.
	stream, err := f.client.HalfDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&testpb.StreamingOutputCallRequest{})
	if _, err := stream.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("HalfDuplexCall: %v", err)
	}
	// The connection still serves.
	if _, err := f.client.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}

// TestDeadline: the client's deadline reaches the handler's context.
func TestDeadline(t *testing.T) {
	f := start(t, h2grpc.Options{})
	seen := make(chan error, 1)
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if _, ok := ctx.Deadline(); !ok {
			seen <- errors.New("no deadline")
			return nil, nil
		}
		<-ctx.Done()
		seen <- ctx.Err()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call: %v", err)
	}
	select {
	case err := <-seen:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("handler saw %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context never ended")
	}
}

// TestCancel: a client canceling its call (RST_STREAM) cancels the
// handler's context.
func TestCancel(t *testing.T) {
	f := start(t, h2grpc.Options{})
	entered, seen := make(chan struct{}), make(chan error, 1)
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		close(entered)
		select {
		case <-ctx.Done():
			seen <- ctx.Err()
		case <-time.After(10 * time.Second):
			seen <- errors.New("not canceled")
		}
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{})
		done <- err
	}()
	<-entered
	cancel()
	if err := <-seen; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler saw %v", err)
	}
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("call: %v", err)
	}
}

func TestMessageTooLarge(t *testing.T) {
	f := start(t, h2grpc.Options{MaxRecvMsgSize: 1000})
	ctx := ctxT(t)
	for _, n := range []int{2000, 200000} {
		_, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(n)})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	if _, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(900)}); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	if got := f.svc.calls.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
}

func TestServerStreaming(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	sizes := []int32{10, 100000, 0, 5}
	req := &testpb.StreamingOutputCallRequest{}
	for _, n := range sizes {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: n})
	}
	stream, err := f.client.StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.GetPayload().GetBody()) != int(n) {
			t.Fatalf("got %d bytes, want %d", len(m.GetPayload().GetBody()), n)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	h, _ := stream.Header()
	tr := stream.Trailer()
	if h.Get("h1")[0] != "v1" || tr.Get("t1")[0] != "v1" || tr.Get("t-bin")[0] != "\x00\x01" {
		t.Fatalf("header %v, trailer %v", h, tr)
	}

	// An error after messages comes as trailers.
	req.ResponseStatus = &testpb.EchoStatus{Code: int32(codes.Aborted), Message: "stop"}
	stream, err = f.client.StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if s := status.Convert(err); s.Code() != codes.Aborted || s.Message() != "stop" {
		t.Fatalf("got %v", err)
	}
}

func TestHealth(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	hc := healthpb.NewHealthClient(f.conn)
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", resp, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := hc.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v", m, err)
	}
	f.health.Shutdown()
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after Shutdown: %v %v", m, err)
	}
}

// TestGracefulStop: calls in flight finish, then GracefulStop returns and
// Serve returns nil.
func TestGracefulStop(t *testing.T) {
	f := start(t, h2grpc.Options{})
	ctx := ctxT(t)
	entered, release := make(chan struct{}), make(chan struct{})
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		close(entered)
		<-release
		return &testpb.SimpleResponse{Username: "done"}, nil
	}
	done := make(chan error, 1)
	go func() {
		resp, err := f.client.UnaryCall(ctx, &testpb.SimpleRequest{})
		if err == nil && resp.GetUsername() != "done" {
			err = errors.New("wrong answer")
		}
		done <- err
	}()
	<-entered
	stopped := make(chan struct{})
	go func() { f.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop did not return")
	}
	if err := <-f.served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	f.served <- nil // for the cleanup
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Serve(lis); !errors.Is(err, h2grpc.ErrServerStopped) {
		t.Fatalf("Serve after GracefulStop: %v", err)
	}
}

// TestStop: Stop cancels calls in flight and returns once their handlers
// have.
func TestStop(t *testing.T) {
	f := start(t, h2grpc.Options{})
	entered, seen := make(chan struct{}), make(chan error, 1)
	f.svc.unary = func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		close(entered)
		<-ctx.Done()
		seen <- ctx.Err()
		return nil, ctx.Err()
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		done <- err
	}()
	<-entered
	f.srv.Stop()
	select {
	case err := <-seen:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler saw %v", err)
		}
	default:
		t.Fatal("Stop returned before the handler")
	}
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("call: %v", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	s := h2grpc.NewServer(h2grpc.Options{})
	testpb.RegisterTestServiceServer(s, &testService{})
	for name, f := range map[string]func(){
		"twice":      func() { testpb.RegisterTestServiceServer(s, &testService{}) },
		"wrong type": func() { s.RegisterService(&healthpb.Health_ServiceDesc, &testService{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
