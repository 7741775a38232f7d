package abuse

// gRPC server reflection (--grpc-reflection) on both gRPC servers: grpcurl
// against it, and the bounds of its stream, which is the one call that
// streams from the client.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

const reflectionInfo = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

// grpcurl returns the grpcurl program (on PATH, or where go install puts
// it), or skips t (fails it under CI=true).
func grpcurl(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("grpcurl not found (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3)")
	}
	t.Skip("grpcurl not found")
	return ""
}

// TestReflectionGrpcurl: with --grpc-reflection, grpcurl lists and
// describes the services and calls ShouldRateLimit with no proto file,
// on either gRPC server.
func TestReflectionGrpcurl(t *testing.T) {
	t.Parallel()
	bin := grpcurl(t)
	dir := streamsDir(t)
	for _, server := range grpcServers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			r := startRLS(t, dir, "--grpc-server", server, "--grpc-reflection")
			run := func(args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				out, err := exec.CommandContext(ctx, bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
				if err != nil {
					t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			list := run(r.grpc, "list")
			for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
				if !strings.Contains(list, want+"\n") {
					t.Errorf("grpcurl list lacks %s:\n%s", want, list)
				}
			}
			if d := run(r.grpc, "describe", "envoy.service.ratelimit.v3.RateLimitService"); !strings.Contains(d, "rpc ShouldRateLimit ( .envoy.service.ratelimit.v3.RateLimitRequest ) returns ( .envoy.service.ratelimit.v3.RateLimitResponse );") {
				t.Errorf("grpcurl describe:\n%s", d)
			}
			call := run("-d", `{"domain": "abuse", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`, r.grpc, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
			if !strings.Contains(call, `"overallCode": "OK"`) {
				t.Errorf("grpcurl ShouldRateLimit:\n%s", call)
			}
		})
	}
}

// listServices is a reflection request, gRPC-framed.
func listServices(t testing.TB) []byte {
	return grpcFramed(t, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
}

// streamsDir is a config directory with streamsRules.
func streamsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", streamsRules)
	return dir
}

// Attack: take every connection slot with reflection streams that stop
// progressing: one stops mid-message, one sends a whole message and then
// nothing (the stream open, its handler waiting for the next).
//
// Bound: a reflection stream's next message, or its end, must come within
// --grpc-request-timeout of the last; past it the connection is closed
// (GOAWAY), freeing its slot, on both servers (grpc-go's behind the same
// guard); a legitimate client waiting in the backlog is then served.
func TestReflectionStalled(t *testing.T) {
	t.Parallel()
	dir := streamsDir(t)
	block, msg := grpcBlock(reflectionInfo), listServices(t)
	attacks := []struct {
		name string
		sent []byte
	}{
		{"mid-message", msg[:len(msg)-2]},
		{"between messages", msg},
	}
	for _, server := range grpcServers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			r := startRLS(t, dir, append([]string{"--grpc-server", server, "--grpc-reflection"}, stallBound...)...)
			for _, at := range attacks {
				t.Run(at.name, func(t *testing.T) {
					stalledSlots(t, r.grpc, "reflection, "+at.name, func(a *h2attack) error {
						return a.write(func() error {
							if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
								return err
							}
							return a.fr.WriteData(1, false, at.sent)
						})
					})
				})
			}
		})
	}
}

// reflectionStream opens a ServerReflectionInfo stream on conn, sends req
// and reads the answer.
func reflectionStream(ctx context.Context, conn *grpc.ClientConn, req *rpb.ServerReflectionRequest) (rpb.ServerReflection_ServerReflectionInfoClient, error) {
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	// An error sending (io.EOF: the server ended the stream) is Recv's
	// to say.
	stream.Send(req)
	_, err = stream.Recv()
	return stream, err
}

// Attack: open reflection streams on one connection and leave them open,
// each holding a handler and its goroutine, as many as the connection's
// MAX_CONCURRENT_STREAMS (256) allows.
//
// Bound: the lean server keeps at most 8 streams that stream from the
// client open on a connection; the next is answered RESOURCE_EXHAUSTED at
// once, and ShouldRateLimit on the same connection is still served.
func TestReflectionStreamFlood(t *testing.T) {
	t.Parallel()
	dir := streamsDir(t)
	r := startRLS(t, dir, "--grpc-reflection", "--max-connections", "4")
	l := newLegit(t, r.grpc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const streams = 100
	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	var wg sync.WaitGroup
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := reflectionStream(ctx, l.conn, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
			mu.Lock()
			codesSeen[status.Code(err)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codesSeen[codes.OK] > 8 || codesSeen[codes.OK]+codesSeen[codes.ResourceExhausted] != streams {
		t.Errorf("%d reflection streams left open on one connection: %v, want at most 8 OK and the rest ResourceExhausted", streams, codesSeen)
	}
	if took, err := l.call(5 * time.Second); err != nil {
		t.Fatalf("ShouldRateLimit beside %d reflection streams: %v after %v", streams, err, took.Round(time.Millisecond))
	}
	t.Logf("%d reflection streams on one connection: %v", streams, codesSeen)
}

// Attack: a reflection request of 8 MiB (a symbol name that long), and a
// message prefix that declares 4 GiB.
//
// Bound: the lean server takes a reflection message of at most 65530
// bytes (a stream's window, less the prefix), grpc-go's of 4 MiB: past
// it the stream ends RESOURCE_EXHAUSTED without the server taking more
// than a window of it, and the connection still serves.
func TestReflectionHugeMessage(t *testing.T) {
	t.Parallel()
	dir := streamsDir(t)
	for _, server := range grpcServers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			r := startRLS(t, dir, "--grpc-server", server, "--grpc-reflection")
			l := newLegit(t, r.grpc)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			huge := &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: strings.Repeat("x", 8<<20)}}
			if _, err := reflectionStream(ctx, l.conn, huge); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("an 8 MiB reflection request: %v, want ResourceExhausted", err)
			}
			// A prefix declaring 4 GiB - 1, on a raw connection.
			a, err := dialH2(r.grpc)
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			a.settingsMaxStreams(t)
			a.mu.Lock()
			a.streams[1] = &h2stream{win: a.initWin}
			a.mu.Unlock()
			if err := a.write(func() error {
				if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: grpcBlock(reflectionInfo), EndHeaders: true}); err != nil {
					return err
				}
				return a.fr.WriteData(1, false, []byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3})
			}); err != nil {
				t.Fatal(err)
			}
			a.mu.Lock()
			reset := a.waitFor(10*time.Second, func() bool { return a.streams[1].reset })
			code := a.streams[1].resetCode
			a.mu.Unlock()
			if !reset {
				t.Errorf("a reflection message declaring 4 GiB: its stream not ended")
			}
			t.Logf("a reflection message declaring 4 GiB: stream reset %v", code)
			if took, err := l.call(5 * time.Second); err != nil {
				t.Fatalf("ShouldRateLimit after: %v after %v", err, took.Round(time.Millisecond))
			}
		})
	}
}
