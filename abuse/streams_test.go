package abuse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// streamsRules is the rule file of the stream tests: a limit no test
// reaches, so every legitimate call is answered OK.
const streamsRules = `
domain: abuse
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
`

// grpcServers are the two --grpc-server choices.
var grpcServers = []string{"lean", "grpc-go"}

// callBlock is the HPACK header block of a ShouldRateLimit call.
func callBlock() []byte { return grpcBlock(shouldRateLimit) }

// grpcBlock is the HPACK header block of a call of path.
func grpcBlock(path string) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", "abuse"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return hb.Bytes()
}

// callMessage is a whole ShouldRateLimit request body, gRPC-framed.
func callMessage(t testing.TB) []byte {
	return grpcFramed(t, &pb.RateLimitRequest{Domain: "abuse", HitsAddend: 1,
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "k", Value: "attacker"}}}}})
}

// grpcFramed is m, gRPC-framed.
func grpcFramed(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

// legit is a well-behaved gRPC client of the RLS (as Envoy is).
type legit struct {
	conn *grpc.ClientConn
	c    pb.RateLimitServiceClient
}

func newLegit(t testing.TB, addr string) *legit {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &legit{conn: conn, c: pb.NewRateLimitServiceClient(conn)}
}

// call makes one call, within d.
func (l *legit) call(d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	resp, err := l.c.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "abuse", HitsAddend: 1,
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "k", Value: "legit"}}}}})
	if err == nil && resp.OverallCode != pb.RateLimitResponse_OK {
		err = fmt.Errorf("answered %v, want OK", resp.OverallCode)
	}
	return time.Since(start), err
}

// median makes up to n calls one after the other, for d at most, and
// returns their median latency.
func (l *legit) median(n int, d time.Duration) (time.Duration, error) {
	var lat []time.Duration
	for deadline := time.Now().Add(d); len(lat) < n && time.Now().Before(deadline); {
		took, err := l.call(5 * time.Second)
		if err != nil {
			return 0, err
		}
		lat = append(lat, took)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], nil
}

// stallConns opens n connections, each with one call that makes no
// progress: open(a) starts it once the server's SETTINGS are in.
func stallConns(t *testing.T, addr string, n int, open func(a *h2attack) error) []*h2attack {
	t.Helper()
	var conns []*h2attack
	t.Cleanup(func() {
		for _, a := range conns {
			a.close()
		}
	})
	for i := range n {
		a, err := dialH2(addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, a)
		a.settingsMaxStreams(t)
		if err := open(a); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	return conns
}

// ended reports whether the server closed a's connection within d (the
// reader saw EOF or a reset), and the GOAWAY it sent first, if any.
func (a *h2attack) ended(d time.Duration) (closed, goaway bool, code http2.ErrCode) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waitFor(d, func() bool { return a.readErr != nil })
	return a.readErr != nil, a.goaway, a.goawayCode
}

// stallBound is what the stalled-stream tests run with: a cap of 20
// connections, idle after 1 s, 1 s for a request to arrive and for an
// answer to be written.
var stallBound = []string{"--max-connections", "20", "--max-connection-idle", "1s", "--grpc-request-timeout", "1s", "--grpc-write-timeout", "1s"}

// Attack: take every connection slot (--max-connections) with connections
// whose one call never progresses, so Envoy cannot connect: a request
// whose HEADERS come without END_STREAM and no DATA follows, or a
// complete request from a client whose receive window is 0
// (SETTINGS_INITIAL_WINDOW_SIZE), so the answer can never be sent. Such a
// connection counted as busy, so --max-connection-idle never ended it
// (20 of 20 still held after 6 s; before, until --max-connection-age, 24
// h).
//
// Bound: a request must arrive whole within --grpc-request-timeout, an
// answer may wait on the client's window for --grpc-write-timeout, and
// idleness is the lack of progress, not of open streams: past either the
// connection is closed (GOAWAY), freeing its slot, on both servers; a
// legitimate client waiting in the listen backlog is then served.
func TestStalledStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", streamsRules)
	block := callBlock()
	msg := callMessage(t)
	attacks := []struct {
		name string
		open func(a *h2attack) error
	}{
		{"headers without END_STREAM", func(a *h2attack) error {
			return a.write(func() error {
				return a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
			})
		}},
		{"zero receive window", func(a *h2attack) error {
			return a.write(func() error {
				if err := a.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
					return err
				}
				if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
					return err
				}
				return a.fr.WriteData(1, true, msg)
			})
		}},
	}
	for _, server := range grpcServers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			r := startRLS(t, dir, append([]string{"--grpc-server", server}, stallBound...)...)
			for _, at := range attacks {
				t.Run(at.name, func(t *testing.T) { stalledSlots(t, r.grpc, at.name, at.open) })
			}
		})
	}
}

// stalledSlots takes the 20 slots of the server at addr with
// connections whose one call open(a) starts and then stalls, and checks
// that a legitimate client waiting in the backlog behind them is
// answered, and that every one of them is closed within 5 s.
func stalledSlots(t *testing.T, addr, name string, open func(a *h2attack) error) {
	t.Helper()
	start := time.Now()
	conns := stallConns(t, addr, 20, open)
	l := newLegit(t, addr)
	took, err := l.call(5 * time.Second)
	if err != nil {
		t.Fatalf("a legitimate call behind 20 stalled connections (%s): %v after %v", name, err, took.Round(time.Millisecond))
	}
	held := 0
	for _, a := range conns {
		if closed, _, _ := a.ended(until(start.Add(5 * time.Second))); !closed {
			held++
		}
	}
	if held > 0 {
		t.Errorf("%d of 20 stalled connections (%s) still open %v after connecting", held, name, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("%s: a legitimate call was answered %v after 20 stalled connections took every slot", name, time.Since(start).Round(time.Millisecond))
}

// resetFlood opens and resets streams on a as fast as it can (HEADERS,
// then RST_STREAM), until stop is closed or the server ends the
// connection, and returns how many streams it reset.
func (a *h2attack) resetFlood(block []byte, stop <-chan struct{}) int {
	bw := bufio.NewWriterSize(a.conn, 64<<10)
	fr := http2.NewFramer(bw, nil)
	n := 0
	for id := uint32(1); id < 1<<31-2; id += 2 {
		if n%256 == 0 {
			select {
			case <-stop:
				return n
			default:
			}
			a.mu.Lock()
			done := a.readErr != nil || a.goaway
			a.mu.Unlock()
			if done {
				return n
			}
		}
		err := a.write(func() error {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
			if n%64 == 63 {
				return bw.Flush()
			}
			return nil
		})
		if err != nil {
			return n
		}
		n++
	}
	return n
}

// Attack: rapid reset (CVE-2023-44487) as a rate: two connections that
// open and reset streams as fast as they can, never more than
// MAX_CONCURRENT_STREAMS open, so that bound never trips. Before, 1.5–2.9
// million streams in 6 s were never cut off, took most of a core, and
// legitimate calls went from about 1 ms to a 67–78 ms median.
//
// Bound: --grpc-reset-rate streams reset a second per connection (200),
// past a burst of --grpc-reset-burst (1000): then GOAWAY
// ENHANCE_YOUR_CALM and the connection is closed, on both servers. The
// attackers here reconnect at once, for 3 s, and a legitimate client
// calls all along.
func TestResetFlood(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", streamsRules)
	block := callBlock()
	for _, server := range grpcServers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			r := startRLS(t, dir, "--grpc-server", server)
			l := newLegit(t, r.grpc)
			quiet, err := l.median(100, time.Second)
			if err != nil {
				t.Fatalf("a legitimate call before the flood: %v", err)
			}
			const attackers = 2
			f := &resetFlooders{addr: r.grpc, block: block, stop: make(chan struct{})}
			var wg sync.WaitGroup
			for range attackers {
				wg.Go(f.run)
			}
			median, err := l.median(1<<20, 3*time.Second)
			if err != nil {
				t.Errorf("a legitimate call during the flood: %v", err)
			}
			close(f.stop)
			wg.Wait()
			t.Logf("%d attackers: %d connections, %d streams opened and reset (as written: the server reads up to its bound), %d cut off with GOAWAY ENHANCE_YOUR_CALM; legitimate calls meanwhile: median %v (%v before the flood)",
				attackers, f.conns, f.resets, f.cut, median, quiet)
			if f.err != nil {
				t.Error(f.err)
			}
			// Every connection but those the test stopped was cut off.
			if f.cut < f.conns-attackers || f.cut == 0 {
				t.Errorf("of %d flooding connections, %d were cut off with GOAWAY ENHANCE_YOUR_CALM, want all but the %d stopped at the end", f.conns, f.cut, attackers)
			}
			r.alive(t)
			if _, err := l.call(5 * time.Second); err != nil {
				t.Errorf("a legitimate call after the flood: %v", err)
			}
		})
	}
}

// resetFlooders are attackers that flood resets on a connection, and on a
// new one each time the server ends theirs, until stop.
type resetFlooders struct {
	addr  string
	block []byte
	stop  chan struct{}

	mu                 sync.Mutex
	conns, resets, cut int
	err                error // the first unexpected end
}

func (f *resetFlooders) run() {
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		a, err := dialH2(f.addr)
		if err != nil {
			f.fail(err)
			return
		}
		n := a.resetFlood(f.block, f.stop)
		closed, goaway, code := a.ended(3 * time.Second)
		a.close()
		f.mu.Lock()
		f.conns++
		f.resets += n
		stopped := !closed
		if goaway && code == http2.ErrCodeEnhanceYourCalm {
			f.cut++
		} else if !stopped && f.err == nil {
			f.err = fmt.Errorf("a flooding connection ended after %d streams with GOAWAY %v (got one: %v), want ENHANCE_YOUR_CALM", n, code, goaway)
		}
		f.mu.Unlock()
		if stopped {
			return
		}
	}
}

func (f *resetFlooders) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}
