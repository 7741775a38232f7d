package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// lockedBuffer is a bytes.Buffer safe for the server's logger and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listeningRE = regexp.MustCompile(`sluice rls: listening.* grpc=(\S+).* http=(\S+)`)

// startRLS runs `sluice rls args...` in process and returns its gRPC and
// HTTP addresses, read from its log, and its logs.
func startRLS(t *testing.T, args ...string) (grpcAddr, httpAddr string, logs *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"rls"}, args...), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sluice rls returned %v", err)
		}
		if !strings.Contains(logs.String(), "sluice rls: stopped") {
			t.Errorf("no stop in the logs:\n%s", logs)
		}
	})
	deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
	for {
		if m := listeningRE.FindStringSubmatch(logs.String()); m != nil {
			return m[1], m[2], logs
		}
		select {
		case err := <-done:
			t.Fatalf("sluice rls exited: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice rls did not log its addresses:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rlsConfigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "rls", "config", "edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// askRLS asks for the example's search limit (5 a second) with each of
// hits as hits_addend.
func askRLS(t *testing.T, addr string, hits ...uint32) []pb.RateLimitResponse_Code {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	var out []pb.RateLimitResponse_Code
	for _, n := range hits {
		resp, err := c.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{
			Domain: "edge", HitsAddend: n,
			Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{
				{Key: "api_key", Value: "k1"}, {Key: "path", Value: "/search?q=x"},
			}}},
		})
		if err != nil {
			t.Fatalf("ShouldRateLimit = %v", err)
		}
		out = append(out, resp.OverallCode)
	}
	return out
}

// TestRLSGRPCServers: both gRPC servers serve the same answers, and the
// log names the one in use.
func TestRLSGRPCServers(t *testing.T) {
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run(impl, func(t *testing.T) {
			grpcAddr, _, logs := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--grpc-server", impl)
			if codes := askRLS(t, grpcAddr, 1, 6); codes[0] != pb.RateLimitResponse_OK || codes[1] != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("codes = %v, want [OK OVER_LIMIT]", codes)
			}
			if !strings.Contains(logs.String(), "grpc_server="+impl) {
				t.Errorf("the log does not name the gRPC server:\n%s", logs)
			}
		})
	}
}

func TestRLSServesExampleConfig(t *testing.T) {
	grpcAddr, httpAddr, _ := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	// The example's search limit is 5 a second: one hit is OK in any
	// window, six are over in any window.
	if codes := askRLS(t, grpcAddr, 1, 6); codes[0] != pb.RateLimitResponse_OK || codes[1] != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("codes = %v, want [OK OVER_LIMIT]", codes)
	}
	resp, err := http.Get("http://" + httpAddr + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "OK" {
		t.Errorf("GET /healthcheck = %d %q, want 200 OK", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `ratelimit_service_rate_limit_total_hits{domain="edge"`) {
		t.Errorf("/metrics lacks total_hits for edge:\n%s", body)
	}
}

var debugRE = regexp.MustCompile(`sluice rls: listening.* debug=(\S+)`)

func TestRLSDebugListen(t *testing.T) {
	_, _, logs := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--debug-listen", "127.0.0.1:0")
	m := debugRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("the log does not name the debug address:\n%s", logs)
	}
	resp, err := http.Get("http://" + m[1] + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "heap profile") {
		t.Errorf("GET /debug/pprof/heap = %d %.100q, want 200 and a heap profile", resp.StatusCode, body)
	}
}

func TestRLSRedis(t *testing.T) {
	redistest.Require(t)
	r := redistest.Start(t)
	grpcAddr, httpAddr, logs := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--store", r.URL(), "--key-prefix", "tenant1:")
	if codes := askRLS(t, grpcAddr, 1, 6); codes[0] != pb.RateLimitResponse_OK || codes[1] != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("codes = %v, want [OK OVER_LIMIT]", codes)
	}
	// --key-prefix (CACHE_KEY_PREFIX) prefixes every key.
	keys, err := r.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := keys.([]any)
	if len(ks) == 0 {
		t.Error("no keys in Redis")
	}
	for _, k := range ks {
		if s, _ := k.(string); !strings.HasPrefix(s, "tenant1:") {
			t.Errorf("key %q lacks the --key-prefix", k)
		}
	}
	// The store's batching counters are exported.
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"sluice_redis_script_calls_total ", "sluice_redis_requests_total "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	if !strings.Contains(logs.String(), "store="+r.URL()) {
		t.Errorf("the log does not name the store:\n%s", logs)
	}
}

func TestRLSUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want error
	}{
		{"help", []string{"--help"}, flag.ErrHelp},
		{"no config dir", nil, errUsage},
		{"bad flag", []string{"--nope"}, errUsage},
		{"bad headers", []string{"--config-dir", ".", "--headers", "loud"}, errUsage},
		{"bad policy", []string{"--config-dir", ".", "--on-store-error", "shrug"}, errUsage},
		{"negative gc percent", []string{"--config-dir", ".", "--gc-percent", "-1"}, errUsage},
		{"negative heap floor", []string{"--config-dir", ".", "--heap-floor-mib", "-1"}, errUsage},
		{"bad grpc server", []string{"--config-dir", ".", "--grpc-server", "netty"}, errUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), append([]string{"rls"}, tc.args...), io.Discard, &stderr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("sluice rls %v = %v, want %v", tc.args, err, tc.want)
			}
			if tc.name == "help" && !strings.Contains(stderr.String(), "--config-dir") && !strings.Contains(stderr.String(), "-config-dir") {
				t.Errorf("help output lacks the flags:\n%s", stderr.String())
			}
		})
	}
}

func TestRLSBadConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"rls", "--config-dir", dir, "--grpc-listen", "127.0.0.1:0", "--http-listen", ""}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:4:") {
		t.Fatalf("sluice rls with a bad config = %v, want an error at bad.yaml:4", err)
	}
}

// TestRLSMaxConnections: past --max-connections, a new connection is not
// served until one closes (it waits in the listen backlog).
func TestRLSMaxConnections(t *testing.T) {
	_, httpAddr, _ := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--max-connections", "2")
	ask := func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var held []net.Conn
	for i := range 2 {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if err := ask(c); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	third.SetDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if err := ask(third); err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a third connection with --max-connections 2 was answered (%v)", err)
	}
	// Once one closes, the third is served (its request is in the socket
	// buffer already; a fresh connection is simpler to read).
	held[0].Close()
	c, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	third.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := ask(c); err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
}
