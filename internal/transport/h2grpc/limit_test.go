package h2grpc_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// TestLimitListener: at most n connections are accepted at once; closing
// one lets the next in, and closing the listener ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := h2grpc.LimitListener(inner, 1)
	defer lis.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	dial()
	accepted := make(chan net.Conn)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted while the first was open")
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close releases nothing more
	second, ok := <-accepted
	if !ok {
		t.Fatal("Accept failed after the first connection closed")
	}
	defer second.Close()

	go func() { time.Sleep(10 * time.Millisecond); lis.Close() }()
	if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}

// TestLimitListenerServes: a server on a LimitListener serves calls
// (reading and writing the socket itself); n <= 0 is no limit.
func TestLimitListenerServes(t *testing.T) {
	for _, n := range []int{0, 2} {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := h2grpc.NewServer(h2grpc.Options{})
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go srv.Serve(h2grpc.LimitListener(inner, n))
		conn, err := grpc.NewClient(inner.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("n=%d: %v %v", n, resp, err)
			}
		}
		conn.Close()
		srv.Stop()
	}
}
