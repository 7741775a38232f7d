package abuse

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// statsdSink is a statsd server on a loopback UDP port: it keeps the
// distinct stat names it received and the longest.
type statsdSink struct {
	conn *net.UDPConn
	mu   sync.Mutex
	seen map[string]bool
	long int
}

func startStatsdSink(t *testing.T) *statsdSink {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadBuffer(8 << 20)
	s := &statsdSink{conn: conn, seen: map[string]bool{}}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				name, _, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				s.seen[name] = true
				s.long = max(s.long, len(name))
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s
}

func (s *statsdSink) names(sub string) (n, longest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.seen {
		if strings.Contains(name, sub) {
			n++
			longest = max(longest, len(name))
		}
	}
	return n, longest
}

// Attack: with detailed_metric and a statsd sink (envoyproxy/ratelimit's
// USE_STATSD), every distinct descriptor value a client sends becomes stat
// names that the sink, and whatever stores them behind it (Graphite,
// Datadog), must keep: a cardinality bill the client writes.
//
// Bound: the statsd names are the Prometheus series' keys, bounded the
// same way (rls.DefaultMaxDetailedSeries): at most 1000 keys of a rule's
// own plus its overflow key, each at most 256 bytes, so 6000 distinct
// 400-byte values reach the sink as at most 1002 distinct keys, and the
// live heap grows by less than 8 MiB once the cap is reached.
func TestRLSStatsdDescriptorFlood(t *testing.T) {
	t.Parallel()
	const (
		values  = 6000
		perReq  = 100
		maxKeys = 1000 // rls.DefaultMaxDetailedSeries
		maxKey  = 256  // rls.MaxMetricKeyLen
	)
	sink := startStatsdSink(t)
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", `
domain: statsdabuse
descriptors:
  - key: client
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`)
	r := startRLS(t, dir, "--statsd", sink.conn.LocalAddr().String(), "--statsd-flush-interval", "100ms", "--debug-listen", "127.0.0.1:0")
	send := func(from, to int) { r.sendDistinct(t, "statsdabuse", from, to, perReq) }
	send(0, 2*maxKeys)
	before := r.liveHeap(t)
	send(2*maxKeys, values)

	// The flood's stats reach the sink within a few flushes; wait until
	// the overflow key has arrived.
	eventually(t, time.Minute, func() error {
		if n, _ := sink.names("__overflow__"); n == 0 {
			return fmt.Errorf("no overflow stat at the sink yet")
		}
		return nil
	})
	// Then let a few more flushes arrive (gauges are sent at every flush,
	// so the sink is never quiet for long): 2 s, not a wait for silence.
	time.Sleep(2 * time.Second)

	// Names are ratelimit.service.rate_limit.<domain>.<key>.<stat>: count
	// the distinct keys.
	sink.mu.Lock()
	keys := map[string]bool{}
	longestKey := 0
	for name := range sink.seen {
		rest, ok := strings.CutPrefix(name, "ratelimit.service.rate_limit.statsdabuse.")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			continue
		}
		keys[rest[:i]] = true
		longestKey = max(longestKey, len(rest[:i]))
	}
	total := len(sink.seen)
	sink.mu.Unlock()
	if len(keys) > maxKeys+2 {
		t.Errorf("%d distinct values: %d distinct keys in stat names at the sink, want at most %d", values, len(keys), maxKeys+2)
	}
	if longestKey > maxKey+len("client_") {
		t.Errorf("a stat key of %d bytes, want at most %d", longestKey, maxKey+len("client_"))
	}
	if len(keys) < maxKeys {
		t.Errorf("only %d distinct keys reached the sink, want the %d detailed ones: the flood's stats were not sent", len(keys), maxKeys)
	}
	after := r.liveHeap(t)
	if after-before > 8<<20 {
		t.Errorf("the live heap grew by %s over %d values past the cap, want under 8 MiB", mib(after-before), values-2*maxKeys)
	}
	t.Logf("%d values: %d distinct stat names at the sink, %d distinct keys (longest %d bytes); live heap %s -> %s",
		values, total, len(keys), longestKey, mib(before), mib(after))
}
