package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// proxyV2 builds a v2 header: command (0 LOCAL, 1 PROXY), family byte,
// and the address block (plus any TLVs).
func proxyV2(cmd, fam byte, addrs []byte) []byte {
	b := append([]byte{}, proxyV2Sig...)
	b = append(b, 0x20|cmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return append(b, addrs...)
}

func v2TCP4(src, dst string, sp, dp uint16) []byte {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	a := append(s[:], d[:]...)
	a = binary.BigEndian.AppendUint16(a, sp)
	return proxyV2(1, 0x11, binary.BigEndian.AppendUint16(a, dp))
}

func v2TCP6(src, dst string, sp, dp uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	a := append(s[:], d[:]...)
	a = binary.BigEndian.AppendUint16(a, sp)
	return proxyV2(1, 0x21, binary.BigEndian.AppendUint16(a, dp))
}

func TestParseProxyHeader(t *testing.T) {
	withTLV := proxyV2(1, 0x11, append(v2TCP4("203.0.113.7", "10.0.0.1", 4000, 443)[16:], 0x04, 0, 3, 'a', 'b', 'c'))
	for _, c := range []struct {
		name string
		in   []byte
		src  string // "" invalid: the peer's own address stands
		n    int
	}{
		{"v1 TCP4", []byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000 443\r\nGET /"), "203.0.113.7:4000", 42},
		{"v1 TCP6", []byte("PROXY TCP6 2001:db8::7 2001:db8::1 4000 443\r\n"), "[2001:db8::7]:4000", 45},
		{"v1 UNKNOWN", []byte("PROXY UNKNOWN whatever\r\nGET"), "", 24},
		{"v1 UNKNOWN bare", []byte("PROXY UNKNOWN\r\n"), "", 15},
		{"v2 TCP4", v2TCP4("203.0.113.7", "10.0.0.1", 4000, 443), "203.0.113.7:4000", 28},
		{"v2 TCP4 TLV", withTLV, "203.0.113.7:4000", 34},
		{"v2 TCP6", v2TCP6("2001:db8::7", "2001:db8::1", 4000, 443), "[2001:db8::7]:4000", 52},
		{"v2 LOCAL", proxyV2(0, 0, nil), "", 16},
		{"v2 UNSPEC", proxyV2(1, 0, []byte{1, 2, 3}), "", 19},
		{"no header HTTP", []byte("GET / HTTP/1.1\r\n"), "", 0},
		{"no header TLS", []byte{0x16, 3, 1, 0, 0xa5}, "", 0},
		{"no header almost v1", []byte("PROXYZ"), "", 0},
	} {
		src, n, err := parseProxyHeader(c.in)
		if err != nil || n != c.n || (c.src == "") == src.IsValid() || (c.src != "" && src.String() != c.src) {
			t.Errorf("%s: got %v %d %v, want %s %d", c.name, src, n, err, c.src, c.n)
		}
	}
}

func TestParseProxyHeaderIncomplete(t *testing.T) {
	for _, full := range [][]byte{
		[]byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000 443\r\n"),
		v2TCP6("2001:db8::7", "2001:db8::1", 4000, 443),
	} {
		for i := 1; i < len(full); i++ {
			if _, n, err := parseProxyHeader(full[:i]); !errors.Is(err, errProxyNeedMore) {
				t.Errorf("%q: got %d %v, want errProxyNeedMore", full[:i], n, err)
			}
		}
	}
}

func TestParseProxyHeaderMalformed(t *testing.T) {
	big := proxyV2(1, 0x11, make([]byte, maxProxyV2Len+1))
	for name, in := range map[string][]byte{
		"v1 oversized":       []byte("PROXY TCP4 " + strings.Repeat("1", 100) + "\r\n"),
		"v1 no CR":           []byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000 443\n"),
		"v1 bad proto":       []byte("PROXY UDP4 203.0.113.7 10.0.0.1 4000 443\r\n"),
		"v1 family mismatch": []byte("PROXY TCP4 2001:db8::7 10.0.0.1 4000 443\r\n"),
		"v1 v6 as TCP6 v4":   []byte("PROXY TCP6 203.0.113.7 10.0.0.1 4000 443\r\n"),
		"v1 bad port":        []byte("PROXY TCP4 203.0.113.7 10.0.0.1 65536 443\r\n"),
		"v1 signed port":     []byte("PROXY TCP4 203.0.113.7 10.0.0.1 +1 443\r\n"),
		"v1 missing field":   []byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000\r\n"),
		"v1 double space":    []byte("PROXY TCP4  203.0.113.7 10.0.0.1 4000 443\r\n"),
		"v1 zone":            []byte("PROXY TCP6 fe80::1%eth0 fe80::2 4000 443\r\n"),
		"v2 oversized":       big[:16],
		"v2 version 1":       append(append([]byte{}, proxyV2Sig...), 0x11, 0x11, 0, 0),
		"v2 command 2":       proxyV2(2, 0x11, make([]byte, 12)),
		"v2 TCP4 short":      proxyV2(1, 0x11, make([]byte, 11)),
		"v2 TCP6 short":      proxyV2(1, 0x21, make([]byte, 35)),
		"v2 UDP4":            proxyV2(1, 0x12, make([]byte, 12)),
		"v2 unknown family":  proxyV2(1, 0x41, make([]byte, 12)),
	} {
		if src, n, err := parseProxyHeader(in); err == nil || errors.Is(err, errProxyNeedMore) {
			t.Errorf("%s: got %v %d %v, want an error", name, src, n, err)
		}
	}
}

// FuzzProxyHeader: a header is never longer than its bound, nor than
// the input; an address is a valid one or none; never a panic.
func FuzzProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000 443\r\nGET /"))
	f.Add([]byte("PROXY TCP6 2001:db8::7 2001:db8::1 4000 443\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(v2TCP4("203.0.113.7", "10.0.0.1", 4000, 443))
	f.Add(v2TCP6("2001:db8::7", "2001:db8::1", 4000, 443))
	f.Add(proxyV2(0, 0, nil))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		src, n, err := parseProxyHeader(b)
		if err != nil && n != 0 {
			t.Fatalf("error %v with n %d", err, n)
		}
		if n > len(b) || n > 16+maxProxyV2Len {
			t.Fatalf("n %d beyond the input (%d) or the bound", n, len(b))
		}
		if src.IsValid() && n == 0 {
			t.Fatalf("address %v without a header", src)
		}
		if errors.Is(err, errProxyNeedMore) && len(b) >= 16+maxProxyV2Len {
			t.Fatalf("wants more than the bound after %d bytes", len(b))
		}
	})
}

// testProxyListener serves the PROXY protocol on a pipe-like loopback
// pair: the accepted side wrapped as the gateway wraps it.
func testProxyConn(t *testing.T, required bool, client func(net.Conn)) (*proxyConn, *proxyListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pl := &proxyListener{Listener: ln, timeout: 10 * time.Second,
		cfg:     &ProxyProtocolConfig{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Required: required},
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "r"}), invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "i"})}
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	go client(cc)
	c, err := pl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*proxyConn), pl
}

// The header's client is the connection's RemoteAddr, and the bytes
// after it, read in the same segment, reach the reader.
func TestProxyConnRemoteAddr(t *testing.T) {
	for _, h := range [][]byte{
		[]byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000 443\r\n"),
		v2TCP4("203.0.113.7", "10.0.0.1", 4000, 443),
		[]byte("PROXY TCP6 ::ffff:203.0.113.7 ::ffff:10.0.0.1 4000 443\r\n"), // a mapped address is the IPv4 one
	} {
		c, _ := testProxyConn(t, true, func(cc net.Conn) { cc.Write(append(h, "hello"...)) })
		if got := c.RemoteAddr().String(); got != "203.0.113.7:4000" {
			t.Errorf("RemoteAddr %s, want 203.0.113.7:4000", got)
		}
		b := make([]byte, 5)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "hello" {
			t.Errorf("read %q %v, want hello", b, err)
		}
	}
}

// Without required, a trusted peer may connect bare and is itself the
// address; with required, it is closed.
func TestProxyConnBare(t *testing.T) {
	c, pl := testProxyConn(t, false, func(cc net.Conn) { cc.Write([]byte("GET / HTTP/1.1\r\n\r\n")) })
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err != nil || ap.Addr().String() != "127.0.0.1" {
		t.Errorf("bare RemoteAddr %v, want the peer", c.RemoteAddr())
	}
	b := make([]byte, 18)
	if _, err := io.ReadFull(c, b); err != nil || !bytes.HasPrefix(b, []byte("GET /")) {
		t.Errorf("bare read %q %v", b, err)
	}
	if testCount(pl.invalid) != 0 {
		t.Error("a bare connection counted invalid without required")
	}
	c, pl = testProxyConn(t, true, func(cc net.Conn) { cc.Write([]byte("GET / HTTP/1.1\r\n\r\n")) })
	if _, err := c.Read(b); err == nil || testCount(pl.invalid) != 1 {
		t.Errorf("bare with required: read err %v, invalid %v; want an error counted", err, testCount(pl.invalid))
	}
}

// A malformed header closes the connection; its reader gets the error.
func TestProxyConnMalformed(t *testing.T) {
	c, pl := testProxyConn(t, false, func(cc net.Conn) { cc.Write([]byte("PROXY TCP4 1.2.3.4 nonsense\r\nGET /")) })
	if _, err := c.Read(make([]byte, 8)); err == nil || testCount(pl.invalid) != 1 {
		t.Errorf("read err %v, invalid %v; want an error counted", err, testCount(pl.invalid))
	}
}

// A peer that sends a header's start and stops is cut at the timeout;
// the wait is in the connection's first use, not in Accept (which
// returned at once for testProxyConn to get here).
func TestProxyConnSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, cli := net.Pipe()
		defer cli.Close()
		pl := &proxyListener{timeout: 3 * time.Second, cfg: &ProxyProtocolConfig{},
			invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "i"})}
		c := &proxyConn{Conn: srv, ln: pl}
		go cli.Write([]byte("PROXY TCP4 203.0"))
		start := time.Now()
		_, err := c.Read(make([]byte, 1))
		if err == nil || time.Since(start) != 3*time.Second || testCount(pl.invalid) != 1 {
			t.Errorf("slow header: err %v after %v (invalid %v), want a timeout at 3s", err, time.Since(start), testCount(pl.invalid))
		}
	})
}

func testCount(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

// BenchmarkParseProxyHeader: once per connection from a trusted peer.
func BenchmarkParseProxyHeader(b *testing.B) {
	for name, h := range map[string][]byte{
		"v1": []byte("PROXY TCP4 203.0.113.7 10.0.0.1 4000 443\r\n"),
		"v2": v2TCP6("2001:db8::7", "2001:db8::1", 4000, 443),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, n, err := parseProxyHeader(h); err != nil || n != len(h) {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// A v2 header whose TLVs take it past the first read's buffer is read
// whole, and the bytes after it kept.
func TestProxyConnLongV2(t *testing.T) {
	tlv := append([]byte{0xEA, 0x03, 0x00}, bytes.Repeat([]byte{'t'}, 768)...)
	h := proxyV2(1, 0x11, append(v2TCP4("203.0.113.7", "10.0.0.1", 4000, 443)[16:], tlv...))
	c, _ := testProxyConn(t, true, func(cc net.Conn) { cc.Write(append(h, "hello"...)) })
	if got := c.RemoteAddr().String(); got != "203.0.113.7:4000" {
		t.Errorf("RemoteAddr %s, want 203.0.113.7:4000", got)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "hello" {
		t.Errorf("read %q %v, want hello", b, err)
	}
}

// A trusted peer that connects and closes before a byte (a balancer's
// TCP health check) is closed without being counted invalid.
func TestProxyConnHealthCheck(t *testing.T) {
	c, pl := testProxyConn(t, true, func(cc net.Conn) { cc.Close() })
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) || testCount(pl.invalid) != 0 {
		t.Errorf("read %v, invalid %v; want EOF, not counted", err, testCount(pl.invalid))
	}
}
