package h2grpc_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// nodeClient is a gRPC client made of Node.js's http2 module, which is
// nghttp2, the HTTP/2 library Envoy's codec was built on: its HPACK
// (Huffman, dynamic table), SETTINGS, window updates and stream
// concurrency are another implementation's, not x/net's or grpc-go's. It
// sends every call on one session at once, with the SETTINGS and the
// connection window the test gives it, and prints what came back.
const nodeClient = `
const http2 = require('http2');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const session = http2.connect('http://' + input.addr, { settings: input.settings });
if (input.connWindow) session.on('connect', () => session.setLocalWindowSize(input.connWindow));
session.on('error', (e) => { console.error(String(e)); process.exit(2); });
const calls = input.calls.map((c) => new Promise((resolve) => {
  const req = session.request(Object.assign({
    ':method': 'POST', ':path': c.path, 'content-type': 'application/grpc', 'te': 'trailers',
  }, c.headers || {}));
  const out = { headers: {}, trailers: {}, data: [] };
  req.on('response', (h) => { out.headers = h; });
  req.on('trailers', (t) => { out.trailers = t; });
  req.on('data', (d) => out.data.push(d));
  req.on('error', (e) => { out.error = String(e); });
  req.on('close', () => {
    out.data = Buffer.concat(out.data).toString('hex');
    out.rstCode = req.rstCode;
    resolve(out);
  });
  req.end(Buffer.from(c.body, 'hex'));
}));
Promise.all(calls).then((res) => {
  process.stdout.write(JSON.stringify(res));
  session.close();
});
`

type nodeCall struct {
	Path    string            `json:"path"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers,omitempty"`
}

type nodeResult struct {
	Headers  map[string]any `json:"headers"`
	Trailers map[string]any `json:"trailers"`
	Data     string         `json:"data"`
	Error    string         `json:"error"`
	RSTCode  int            `json:"rstCode"`
}

// grpcStatus is the call's grpc-status.
func (r nodeResult) grpcStatus() string { return r.trailer("grpc-status") }

// trailer is a trailer field, or a field of a trailers-only answer's
// headers.
func (r nodeResult) trailer(name string) string {
	for _, m := range []map[string]any{r.Trailers, r.Headers} {
		if v, ok := m[name].(string); ok {
			return v
		}
	}
	return ""
}

// messages splits a response body into its gRPC messages.
func (r nodeResult) messages(t *testing.T) [][]byte {
	t.Helper()
	b, err := hex.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	for len(b) > 0 {
		if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) > len(b)-5 {
			t.Fatalf("malformed message framing: % x", b[:min(len(b), 16)])
		}
		n := 5 + int(binary.BigEndian.Uint32(b[1:5]))
		msgs = append(msgs, b[5:n])
		b = b[n:]
	}
	return msgs
}

func frameHex(t *testing.T, m proto.Message) string {
	return hex.EncodeToString(marshalFrame(t, m))
}

// TestNodeHTTP2Client serves Node.js's HTTP/2 client (nghttp2): unary
// calls larger than either side's initial window, many at once on one
// session, a server stream with metadata, deadlines and errors. It skips
// where node is not installed.
func TestNodeHTTP2Client(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	f := start(t, h2grpc.Options{})
	script := filepath.Join(t.TempDir(), "client.js")
	if err := os.WriteFile(script, []byte(nodeClient), 0o644); err != nil {
		t.Fatal(err)
	}

	// 100 kB each way is more than nghttp2's and the server's initial
	// stream windows (64 KiB), so both sides must send WINDOW_UPDATEs.
	big := &testpb.SimpleRequest{ResponseSize: 100_000, Payload: payload(100_000)}
	calls := []nodeCall{
		{Path: "/grpc.health.v1.Health/Check", Body: frameHex(t, &healthpb.HealthCheckRequest{})},
		{Path: "/grpc.testing.TestService/StreamingOutputCall", Body: frameHex(t, &testpb.StreamingOutputCallRequest{
			ResponseParameters: []*testpb.ResponseParameters{{Size: 10}, {Size: 70_000}, {Size: 0}},
		})},
		{Path: "/grpc.testing.TestService/UnaryCall", Body: frameHex(t, &testpb.SimpleRequest{
			ResponseStatus: &testpb.EchoStatus{Code: 9, Message: "not now: é"},
		})},
		{Path: "/no.Such/Method", Body: frameHex(t, &testpb.Empty{})},
		// The headers Envoy's gRPC client adds to a rate limit call (its
		// filter's default timeout is 20ms; 5S here, for slow machines).
		{Path: "/grpc.testing.TestService/UnaryCall", Body: frameHex(t, &testpb.SimpleRequest{ResponseSize: 1}),
			Headers: map[string]string{":authority": "rate_limit_cluster", "grpc-timeout": "5S", "x-envoy-internal": "true",
				"x-forwarded-for": "10.0.0.1", "x-envoy-expected-rq-timeout-ms": "5000", "x-custom": "a value"}},
	}
	const many = 100
	for i := range many {
		req := &testpb.SimpleRequest{ResponseSize: int32(i * 997)}
		if i%10 == 0 {
			req = big
		}
		calls = append(calls, nodeCall{Path: "/grpc.testing.TestService/UnaryCall", Body: frameHex(t, req)})
	}
	// The session as Envoy opens one to a gRPC cluster by default: 256 MiB
	// stream and connection windows, no push, no limit on streams.
	settings := map[string]any{"initialWindowSize": 1 << 28, "enablePush": false, "maxConcurrentStreams": 1<<31 - 1}
	in, err := json.Marshal(map[string]any{"addr": f.addr, "calls": calls, "settings": settings, "connWindow": 1 << 28})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v: %s", err, stderr.String())
	}
	var res []nodeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node's output: %v: %.200s", err, out)
	}
	if len(res) != len(calls) {
		t.Fatalf("%d results for %d calls", len(res), len(calls))
	}
	for i, r := range res {
		if r.Error != "" || r.RSTCode != 0 {
			t.Fatalf("call %d (%s): error %q, RST_STREAM %d", i, calls[i].Path, r.Error, r.RSTCode)
		}
		if r.Headers[":status"] != float64(200) || r.Headers["content-type"] != "application/grpc" {
			t.Errorf("call %d: headers %v", i, r.Headers)
		}
	}

	// Health.
	var hr healthpb.HealthCheckResponse
	if msgs := res[0].messages(t); len(msgs) != 1 || proto.Unmarshal(msgs[0], &hr) != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING || res[0].grpcStatus() != "0" {
		t.Errorf("health: %+v", res[0])
	}
	// The server stream: three messages of the sizes asked, its header
	// and trailer metadata.
	stream := res[1]
	msgs := stream.messages(t)
	if len(msgs) != 3 || stream.grpcStatus() != "0" {
		t.Fatalf("stream: %d messages, status %q", len(msgs), stream.grpcStatus())
	}
	for i, want := range []int{10, 70_000, 0} {
		var m testpb.StreamingOutputCallResponse
		if err := proto.Unmarshal(msgs[i], &m); err != nil || len(m.GetPayload().GetBody()) != want {
			t.Errorf("stream message %d: %v, %d bytes, want %d", i, err, len(m.GetPayload().GetBody()), want)
		}
	}
	if stream.Headers["h1"] != "v1" || stream.Trailers["t1"] != "v1" {
		t.Errorf("stream metadata: headers %v, trailers %v", stream.Headers, stream.Trailers)
	}
	// A status with a message outside ASCII, percent-encoded.
	if st, msg := res[2].grpcStatus(), res[2].trailer("grpc-message"); st != "9" || msg != "not now: %C3%A9" {
		t.Errorf("error status: %q %q (headers %v)", st, msg, res[2].Headers)
	}
	if st := res[3].grpcStatus(); st != "12" {
		t.Errorf("unknown method: grpc-status %q", st)
	}
	if st := res[4].grpcStatus(); st != "0" {
		t.Errorf("with grpc-timeout: grpc-status %q", st)
	}
	for i := range many {
		r := res[5+i]
		want := i * 997
		if i%10 == 0 {
			want = 100_000
		}
		var m testpb.SimpleResponse
		msgs := r.messages(t)
		if len(msgs) != 1 || proto.Unmarshal(msgs[0], &m) != nil || len(m.GetPayload().GetBody()) != want || r.grpcStatus() != "0" {
			t.Errorf("unary call %d: %d messages, status %q", i, len(msgs), r.grpcStatus())
			continue
		}
		if !bytes.Equal(m.GetPayload().GetBody(), payload(want).GetBody()) {
			t.Errorf("unary call %d: payload differs", i)
		}
	}
	if got, want := f.svc.calls.Load(), int64(many+2); got != want {
		t.Errorf("the unary handler ran %d times, want %d", got, want)
	}
}
