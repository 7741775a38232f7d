package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// rlsTLS is a CA, the server's certificate files and a client CA file.
type rlsTLS struct {
	ca, other           *testcerts.CA
	dir                 string
	cert, key, clientCA string
}

func newRLSTLS(t *testing.T) *rlsTLS {
	t.Helper()
	x := &rlsTLS{ca: testcerts.NewCA("sluice test CA"), other: testcerts.NewCA("another CA"), dir: t.TempDir()}
	var err error
	if x.cert, x.key, err = x.ca.Server("rls-1").Write(x.dir, "server"); err != nil {
		t.Fatal(err)
	}
	if x.clientCA, err = x.ca.WriteCA(x.dir, "clients"); err != nil {
		t.Fatal(err)
	}
	return x
}

// clientCreds trusts x's CA and presents client (none if nil).
func (x *rlsTLS) clientCreds(client *testcerts.Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: x.ca.Pool(), ServerName: "127.0.0.1"}
	if client != nil {
		cfg.Certificates = []tls.Certificate{client.TLS()}
	}
	return cfg
}

// askOver asks the example's search limit (5 a second) with each of hits
// as hits_addend over conn; the first error is returned.
func askOver(conn *grpc.ClientConn, hits ...uint32) ([]pb.RateLimitResponse_Code, error) {
	c := pb.NewRateLimitServiceClient(conn)
	var out []pb.RateLimitResponse_Code
	for _, n := range hits {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.ShouldRateLimit(ctx, &pb.RateLimitRequest{
			Domain: "edge", HitsAddend: n,
			Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{
				{Key: "api_key", Value: "k1"}, {Key: "path", Value: "/search?q=x"},
			}}},
		})
		cancel()
		if err != nil {
			return out, err
		}
		out = append(out, resp.OverallCode)
	}
	return out, nil
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// servedCN handshakes with addr as a gRPC client would and returns the
// common name of the certificate served.
func servedCN(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestRLSTLS: on both gRPC servers, the envoy ratelimit v3 client gets
// its answers over TLS, and a client without TLS none; a replaced
// certificate is served to the next connection.
func TestRLSTLS(t *testing.T) {
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run(impl, func(t *testing.T) {
			x := newRLSTLS(t)
			addr, httpAddr, logs := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
				"--grpc-server", impl, "--grpc-tls-cert", x.cert, "--grpc-tls-key", x.key)
			codes, err := askOver(dialTLS(t, addr, x.clientCreds(nil)), 1, 6)
			if err != nil || codes[0] != pb.RateLimitResponse_OK || codes[1] != pb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("over TLS: %v, %v; want [OK OVER_LIMIT]", codes, err)
			}
			if _, err := askOver(dialInsecure(t, addr), 1); err == nil {
				t.Fatal("a cleartext client got an answer from the TLS listener")
			}
			// A TLS client that does not negotiate h2 gets nothing of HTTP/2.
			if tc, err := tls.Dial("tcp", addr, x.clientCreds(nil)); err == nil {
				tc.SetReadDeadline(time.Now().Add(10 * time.Second))
				n, err := tc.Read(make([]byte, 64))
				tc.Close()
				if err == nil {
					t.Fatalf("a client without ALPN h2 read %d bytes", n)
				}
			}
			if cn := servedCN(t, addr, x.clientCreds(nil)); cn != "rls-1" {
				t.Fatalf("served %q, want rls-1", cn)
			}
			if _, _, err := x.ca.Server("rls-2").Write(x.dir, "server"); err != nil {
				t.Fatal(err)
			}
			if cn := servedCN(t, addr, x.clientCreds(nil)); cn != "rls-2" {
				t.Fatalf("after the files were replaced, served %q, want rls-2", cn)
			}
			if _, err = askOver(dialTLS(t, addr, x.clientCreds(nil)), 1); err != nil {
				t.Fatalf("over TLS with the new certificate: %v", err)
			}
			resp, err := http.Get("http://" + httpAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !contains(string(body), `sluice_tls_reloads_total{listener="grpc"} 1`) || !contains(string(body), "sluice_tls_certificate_not_after_seconds") {
				t.Errorf("/metrics lacks the TLS reload count or expiry")
			}
			if !contains(logs.String(), "grpc_tls=tls") || !contains(logs.String(), "certificate reloaded") {
				t.Errorf("logs lack grpc_tls=tls or the reload:\n%s", logs)
			}
		})
	}
}

// TestRLSMutualTLS: with a client CA and SAN, only clients with a
// certificate from that CA carrying that SAN get answers.
func TestRLSMutualTLS(t *testing.T) {
	const san = "spiffe://cluster.local/ns/envoy-gateway-system/sa/envoy"
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run(impl, func(t *testing.T) {
			x := newRLSTLS(t)
			addr, _, logs := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
				"--grpc-server", impl, "--grpc-tls-cert", x.cert, "--grpc-tls-key", x.key,
				"--grpc-tls-client-ca", x.clientCA, "--grpc-tls-client-san", san)
			good := x.ca.Client("envoy", nil, san)
			codes, err := askOver(dialTLS(t, addr, x.clientCreds(&good)), 1, 6)
			if err != nil || codes[0] != pb.RateLimitResponse_OK || codes[1] != pb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("over mTLS: %v, %v; want [OK OVER_LIMIT]", codes, err)
			}
			wrongCA := x.other.Client("envoy", nil, san)
			wrongSAN := x.ca.Client("envoy", nil, "spiffe://cluster.local/ns/default/sa/intruder")
			for name, client := range map[string]*testcerts.Pair{"no certificate": nil, "another CA": &wrongCA, "another SAN": &wrongSAN} {
				if codes, err := askOver(dialTLS(t, addr, x.clientCreds(client)), 1); err == nil {
					t.Errorf("a client with %s got %v", name, codes)
				}
			}
			if !contains(logs.String(), "grpc_tls=mtls") {
				t.Errorf("logs lack grpc_tls=mtls:\n%s", logs)
			}
		})
	}
}

// TestRLSMaxConnectionAge: with a short --max-connection-age the client
// is made to reconnect, over TLS, and no call fails.
func TestRLSMaxConnectionAge(t *testing.T) {
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run(impl, func(t *testing.T) {
			x := newRLSTLS(t)
			addr, _, _ := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
				"--grpc-server", impl, "--grpc-tls-cert", x.cert, "--grpc-tls-key", x.key,
				"--max-connection-age", "100ms", "--max-connection-age-grace", "5s")
			var dials atomic.Int64
			conn := dialTLS(t, addr, x.clientCreds(nil), grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, "tcp", a)
			}))
			deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
			calls := 0
			for dials.Load() < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d dials after %d calls in a minute, want 3", dials.Load(), calls)
				}
				if _, err := askOver(conn, 0); err != nil {
					t.Fatalf("call %d: %v", calls, err)
				}
				calls++
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestRLSTLSUsage(t *testing.T) {
	x := newRLSTLS(t)
	for _, args := range [][]string{
		{"--grpc-tls-cert", x.cert},
		{"--grpc-tls-client-ca", x.clientCA},
		{"--grpc-tls-cert", x.cert, "--grpc-tls-key", x.key, "--grpc-tls-client-san", "x"},
		{"--max-connection-age", "-1s"},
		{"--grpc-request-timeout", "-1s"},
		{"--grpc-write-timeout", "-1s"},
		{"--grpc-reset-rate", "-1"},
		{"--grpc-reset-burst", "0"},
	} {
		if _, _, err := parseRLSFlags(append([]string{"--config-dir", "x"}, args...), discard{}); err == nil {
			t.Errorf("%q: no usage error", args)
		}
	}
	// A key that does not match fails at start, naming the files.
	other := x.ca.Server("other")
	_, badKey, err := other.Write(x.dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"rls", "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "",
		"--grpc-tls-cert", x.cert, "--grpc-tls-key", badKey}, discard{}, discard{})
	if err == nil || !contains(err.Error(), x.cert) {
		t.Fatalf("mismatched key: %v, want an error naming %s", err, x.cert)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func dialInsecure(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestRLSMaxConnectionIdle: on both gRPC servers, a connection left
// without calls gets GOAWAY and the client's channel goes idle; its next
// call reconnects.
func TestRLSMaxConnectionIdle(t *testing.T) {
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run(impl, func(t *testing.T) {
			addr, _, _ := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
				"--grpc-server", impl, "--max-connection-idle", "100ms")
			var dials atomic.Int64
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
					dials.Add(1)
					return (&net.Dialer{}).DialContext(ctx, "tcp", a)
				}))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := askOver(conn, 0); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
			for conn.GetState() != connectivity.Idle {
				if time.Now().After(deadline) {
					t.Fatalf("the channel is %v a minute after its last call, want IDLE (server's GOAWAY)", conn.GetState())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := askOver(conn, 0); err != nil || dials.Load() != 2 {
				t.Fatalf("after the idle close: %v, %d dials; want an answer over a second connection", err, dials.Load())
			}
		})
	}
}
