package h2grpc_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// serveOn serves a testService with o on a counting loopback listener.
func serveOn(t *testing.T, o h2grpc.Options, svc *testService) *countingListener {
	t.Helper()
	srv := h2grpc.NewServer(o)
	testpb.RegisterTestServiceServer(srv, svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	done := make(chan struct{})
	go func() { srv.Serve(cl); close(done) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return cl
}

func dialGRPC(t *testing.T, addr string, creds credentials.TransportCredentials) testpb.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func TestTLS(t *testing.T) {
	ca := testcerts.NewCA("ca")
	cert := ca.Server("server").TLS()
	ln := serveOn(t, h2grpc.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, &testService{})
	addr := ln.Addr().String()
	ctx := ctxT(t)

	c := dialGRPC(t, addr, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()}))
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 100})
	if err != nil || len(resp.GetPayload().GetBody()) != 100 {
		t.Fatalf("over TLS: %v, %v", resp, err)
	}

	// Cleartext to a TLS server fails.
	plain := dialGRPC(t, addr, insecure.NewCredentials())
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := plain.EmptyCall(sctx, &testpb.Empty{}); status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("h2c to the TLS server: %v, want Unavailable", err)
	}

	// A client offering other protocols fails the handshake; one offering
	// http/1.1 alone (Go's server then negotiates nothing, as RFC 7301
	// allows) or no ALPN at all is closed after it, before any frame.
	if tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"spdy/3"}}); err == nil {
		tc.Close()
		t.Fatalf("a client offering spdy/3 only completed the handshake")
	}
	for _, protos := range [][]string{nil, {"http/1.1"}} {
		tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: protos})
		if err != nil {
			t.Fatal(err)
		}
		tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := tc.Read(make([]byte, 64)); !errors.Is(err, io.EOF) {
			t.Fatalf("a client offering ALPN %q read %d bytes, %v; want EOF (closed, no server preface)", protos, n, err)
		}
		tc.Close()
	}
}

// TestMaxConnectionAge: connections end with GOAWAY after their age, and
// the client's calls go on over new connections without failing.
func TestMaxConnectionAge(t *testing.T) {
	ln := serveOn(t, h2grpc.Options{MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: time.Second}, &testService{})
	c := dialGRPC(t, ln.Addr().String(), insecure.NewCredentials())
	ctx := ctxT(t)
	calls := 0
	for ln.n.Load() < 4 {
		if ctx.Err() != nil {
			t.Fatalf("after %d calls, %d connections: want 4", calls, ln.n.Load())
		}
		if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		calls++
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMaxConnectionAgeGrace: a call still running at age plus grace is
// cut with the connection.
func TestMaxConnectionAgeGrace(t *testing.T) {
	svc := &testService{unary: func(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	ln := serveOn(t, h2grpc.Options{MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: 50 * time.Millisecond}, svc)
	c := dialGRPC(t, ln.Addr().String(), insecure.NewCredentials())
	_, err := c.UnaryCall(ctxT(t), &testpb.SimpleRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a call outliving age and grace: %v, want Unavailable (connection closed)", err)
	}
}

// TestMaxConnectionIdle: a connection past its preface with no call gets
// GOAWAY and is closed, freeing its slot; one with calls going is kept.
func TestMaxConnectionIdle(t *testing.T) {
	// The idle time is long enough that a loaded machine's scheduling
	// delays between the busy client's calls (5 ms apart) stay below it.
	const idle = 400 * time.Millisecond
	ln := serveOn(t, h2grpc.Options{MaxConnectionIdle: idle}, &testService{})
	addr := ln.Addr().String()
	rc := dialRaw(t, addr)
	rc.handshake()
	var ev event
	for {
		var err error
		if ev, err = rc.nextWithin(20 * time.Second); err != nil {
			t.Fatalf("idle connection: %v before any GOAWAY", err)
		}
		if ev.typ == http2.FrameGoAway {
			break
		}
	}
	if ev.code != http2.ErrCodeNo || string(ev.data) != "max_idle" {
		t.Fatalf("got %v, want GOAWAY NO_ERROR max_idle", ev)
	}
	rc.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(rc.nc); err != nil {
		t.Fatalf("after GOAWAY: %v, want EOF", err)
	}

	// A busy client keeps its connection: calls spaced less than the idle
	// time apart over five idle periods, one connection.
	c := dialGRPC(t, addr, insecure.NewCredentials())
	before := ln.n.Load()
	ctx := ctxT(t)
	for deadline := time.Now().Add(5 * idle); time.Now().Before(deadline); {
		if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ln.n.Load() - before; n != 1 {
		t.Fatalf("a busy client made %d connections, want 1", n)
	}
}
