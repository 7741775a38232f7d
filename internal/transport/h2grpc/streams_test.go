package h2grpc_test

// The stream limits (StreamLimits, and MaxConnectionIdle as progress) on
// both servers: h2grpc's, and grpc-go's behind Guard.

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// servers serve a testService with Options o: h2grpc's Server, and
// grpc-go's with Guard.
var servers = []struct {
	name  string
	serve func(t *testing.T, o h2grpc.Options, svc *testService) string
}{
	{"lean", func(t *testing.T, o h2grpc.Options, svc *testService) string {
		_, addr := serveRaw(t, o, svc)
		return addr
	}},
	{"grpc-go", func(t *testing.T, o h2grpc.Options, svc *testService) string {
		t.Helper()
		srv := grpc.NewServer(grpc.Creds(h2grpc.Guard(insecure.NewCredentials(), o)), grpc.MaxConcurrentStreams(256))
		testpb.RegisterTestServiceServer(srv, svc)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}},
}

// goAwayWithin reads until a GOAWAY and returns it; the test fails if
// the connection ends, or nothing comes for d, before one.
func (c *rawClient) goAwayWithin(d time.Duration) event {
	c.t.Helper()
	for {
		ev, err := c.nextWithin(d)
		if err != nil {
			c.t.Fatalf("no GOAWAY within %v: %v", d, err)
		}
		if ev.typ == http2.FrameGoAway {
			return ev
		}
		if ev.typ == http2.FrameSettings && !ev.flags.Has(http2.FlagSettingsAck) {
			c.check(c.fr.WriteSettingsAck())
		}
	}
}

// served checks that a well-behaved client is answered beside the
// attack.
func served(t *testing.T, addr string) {
	t.Helper()
	if _, err := dialGRPC(t, addr, insecure.NewCredentials()).EmptyCall(ctxT(t), &testpb.Empty{}); err != nil {
		t.Fatalf("a well-behaved client beside the attack: %v", err)
	}
}

// TestStalledRequest: a call whose HEADERS come without END_STREAM, and
// nothing after, ends its connection after RequestTimeout (GOAWAY
// NO_ERROR "stalled_request"), on both servers.
func TestStalledRequest(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			addr := s.serve(t, h2grpc.Options{StreamLimits: h2grpc.StreamLimits{RequestTimeout: 100 * time.Millisecond}}, &testService{})
			c := dialRaw(t, addr)
			c.handshake()
			c.writeBlock(1, c.block(reqFields(pathUnary)...), false)
			ev := c.goAwayWithin(readTimeout)
			if ev.code != http2.ErrCodeNo || string(ev.data) != "stalled_request" || ev.lastID != 1 {
				t.Fatalf("got %v, want GOAWAY NO_ERROR last 1 stalled_request", ev)
			}
			c.expectClose()
			served(t, addr)
		})
	}
}

// TestZeroWindow: a client whose receive window is 0
// (SETTINGS_INITIAL_WINDOW_SIZE) sends a whole request, so its answer can
// never be sent: the connection ends after WriteTimeout (GOAWAY NO_ERROR
// "stalled_write"), on both servers.
func TestZeroWindow(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			addr := s.serve(t, h2grpc.Options{StreamLimits: h2grpc.StreamLimits{WriteTimeout: 100 * time.Millisecond}}, &testService{})
			c := dialRaw(t, addr)
			c.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			c.send(1, reqFields(pathUnary), marshalFrame(t, &testpb.SimpleRequest{ResponseSize: 10}))
			ev := c.goAwayWithin(readTimeout)
			if ev.code != http2.ErrCodeNo || string(ev.data) != "stalled_write" {
				t.Fatalf("got %v, want GOAWAY NO_ERROR stalled_write", ev)
			}
			c.expectClose()
			served(t, addr)
		})
	}
}

// TestResetRate: a client opening and resetting streams, never more than
// one open, is cut off past ResetBurst resets (at ResetRate a second):
// GOAWAY ENHANCE_YOUR_CALM, then the connection closes, on both servers.
func TestResetRate(t *testing.T) {
	const burst, streams = 20, 2000
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			addr := s.serve(t, h2grpc.Options{StreamLimits: h2grpc.StreamLimits{ResetRate: 1, ResetBurst: burst}}, &testService{})
			c := dialRaw(t, addr)
			c.handshake()
			block := c.block(reqFields(pathUnary)...)
			go func() {
				// Written from another goroutine: the server may stop
				// reading (and close) before the end.
				for i := range streams {
					id := uint32(2*i + 1)
					if c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}) != nil ||
						c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
						return
					}
				}
			}()
			ev := c.goAwayWithin(readTimeout)
			if ev.code != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("got %v, want GOAWAY ENHANCE_YOUR_CALM", ev)
			}
			// The burst is honoured, and the connection ends well before
			// the client's last stream.
			if n := (ev.lastID + 1) / 2; n <= burst || n >= streams {
				t.Fatalf("GOAWAY after %d streams, want more than the burst (%d) and fewer than %d", n, burst, streams)
			}
			c.expectClose()
			served(t, addr)
		})
	}
}

// TestIdleIsProgress: a client that keeps one stream open at all times,
// each reset before RequestTimeout and replaced, makes no progress: its
// connection gets GOAWAY "max_idle" after MaxConnectionIdle, on both
// servers.
func TestIdleIsProgress(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			addr := s.serve(t, h2grpc.Options{MaxConnectionIdle: 100 * time.Millisecond,
				StreamLimits: h2grpc.StreamLimits{RequestTimeout: time.Hour, WriteTimeout: 40 * time.Millisecond}}, &testService{})
			c := dialRaw(t, addr)
			c.handshake()
			block := c.block(reqFields(pathUnary)...)
			got := make(chan event, 1)
			go func() {
				for {
					ev, err := c.nextWithin(readTimeout)
					if err != nil {
						ev = event{data: []byte(err.Error())}
					}
					if err != nil || ev.typ == http2.FrameGoAway {
						got <- ev
						return
					}
				}
			}()
			check := func(ev event) {
				if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || string(ev.data) != "max_idle" {
					t.Fatalf("got %v, want GOAWAY NO_ERROR max_idle", ev)
				}
			}
			// Two hundred idle periods at most.
			for id := uint32(1); id < 2*2000; id += 2 {
				err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
				if err == nil && id > 1 {
					err = c.fr.WriteRSTStream(id-2, http2.ErrCodeCancel)
				}
				if err != nil {
					// The server sent GOAWAY and closed between two of our
					// writes: what it sent before closing is the answer.
					select {
					case ev := <-got:
						check(ev)
					case <-time.After(readTimeout):
						t.Fatalf("write: %v, and no GOAWAY read", err)
					}
					return
				}
				select {
				case ev := <-got:
					check(ev)
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			t.Fatalf("a connection that only opens and resets streams got no GOAWAY in 200 idle periods")
		})
	}
}
