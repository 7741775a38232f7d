package abuse

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// ppConfig is a gateway limiting each client address to 2 requests an
// hour, with proxy_protocol as given.
func ppConfig(t *testing.T, upstream, pp string) string {
	return writeFile(t, t.TempDir(), "gateway.yaml", perIPGateway(upstream, "proxy_protocol: "+pp+"\nconnections: {read_header_timeout: 30s}", "fixed_window", 2))
}

// ppV1 is a v1 header for a TCP client at src (IPv4 or IPv6).
func ppV1(src string) []byte {
	fam := "TCP4"
	if strings.Contains(src, ":") {
		fam = "TCP6"
	}
	dst := "10.0.0.1"
	if fam == "TCP6" {
		dst = "2001:db8::1"
	}
	return fmt.Appendf(nil, "PROXY %s %s %s 40000 80\r\n", fam, src, dst)
}

// ppV2 is a v2 PROXY header for a TCP client at src, with a TLV after
// the addresses as AWS's NLB sends.
func ppV2(src string) []byte {
	a := netip.MustParseAddr(src)
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21")
	var addrs []byte
	if a.Is4() {
		b = append(b, 0x11)
		d := [4]byte{10, 0, 0, 1}
		addrs = append(a.AsSlice(), d[:]...)
	} else {
		b = append(b, 0x21)
		d := netip.MustParseAddr("2001:db8::1").As16()
		addrs = append(a.AsSlice(), d[:]...)
	}
	addrs = binary.BigEndian.AppendUint16(addrs, 40000)
	addrs = binary.BigEndian.AppendUint16(addrs, 80)
	addrs = append(addrs, 0xEA, 0, 4, 'v', 'p', 'c', 'e') // AWS's TLV type, a short value
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return append(b, addrs...)
}

// ppGet writes header then a GET on a new connection to addr and returns
// the answer's status, or an error when the connection closed without
// one.
func ppGet(addr string, header []byte) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append(slices.Clone(header), "GET / HTTP/1.1\r\nHost: abuse\r\nConnection: close\r\n\r\n"...)); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// Attack: a client connects straight to a gateway meant to sit behind an
// L4 load balancer and sends a PROXY header naming a fresh address on
// each connection, to get a fresh per-IP limit each time.
//
// Bound: the header is believed only from proxy_protocol.trusted (here
// 10.0.0.0/8, not the test's 127.0.0.1). Without required, the forged
// header is a malformed request (400), never served, and the real
// peer's limit holds (2 answered, then 429); with required, the
// untrusted peer's connection is closed unanswered and counted.
func TestProxyProtocolForgedFromUntrusted(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startServe(t, ppConfig(t, up.srv.URL, "{trusted: [10.0.0.0/8]}"))
	addr := hostPort(g.url)
	for i, want := range []int{200, 200, 429} {
		if code, err := ppGet(addr, nil); err != nil || code != want {
			t.Fatalf("plain request %d: %d %v, want %d", i, code, err, want)
		}
	}
	for i := range 10 {
		src := fmt.Sprintf("198.51.100.%d", i+1)
		h := ppV1(src)
		if i%2 == 1 {
			h = ppV2(src)
		}
		if code, err := ppGet(addr, h); err == nil && code != http.StatusBadRequest {
			t.Errorf("forged header %d (%s) from an untrusted peer: %d, want 400 or no answer", i, src, code)
		}
	}
	if code, err := ppGet(addr, nil); err != nil || code != http.StatusTooManyRequests {
		t.Errorf("plain request after the forgeries: %d %v, want 429 still", code, err)
	}
	if n := len(up.requests()); n != 2 {
		t.Errorf("%d requests reached the upstream, want the real peer's 2", n)
	}

	g2 := startServe(t, ppConfig(t, up.srv.URL, "{trusted: [10.0.0.0/8], required: true}"))
	for _, h := range [][]byte{nil, ppV1("198.51.100.1"), ppV2("198.51.100.2")} {
		if code, err := ppGet(hostPort(g2.url), h); err == nil {
			t.Errorf("untrusted peer with required (header %q): answered %d, want the connection closed", h, code)
		}
	}
	ppRejected(t, g2, "untrusted", 3)
}

// Attack (the limit's purpose, behind a balancer): every caller arrives
// from the balancer's address and would share one per-IP limit.
//
// Bound: from a trusted balancer, the PROXY header's client (v1 or v2,
// IPv4 or IPv6) is the request's address: two callers get two limits (2
// answered each, then 429), the upstream's X-Forwarded-For names them,
// and a connection without a header (required) is closed and counted.
func TestProxyProtocolSeparatesCallers(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startServe(t, ppConfig(t, up.srv.URL, "{trusted: [127.0.0.1], required: true}"))
	addr := hostPort(g.url)
	for _, caller := range []struct {
		src string
		h   func(string) []byte
	}{{"198.51.100.1", ppV1}, {"198.51.100.2", ppV2}, {"2001:db8::7", ppV1}, {"2001:db8::8", ppV2}} {
		for i, want := range []int{200, 200, 429} {
			if code, err := ppGet(addr, caller.h(caller.src)); err != nil || code != want {
				t.Errorf("caller %s request %d: %d %v, want %d", caller.src, i, code, err, want)
			}
		}
	}
	var xff []string
	for _, r := range up.requests() {
		xff = append(xff, r.Header.Get("X-Forwarded-For"))
	}
	if want := []string{"198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.2", "2001:db8::7", "2001:db8::7", "2001:db8::8", "2001:db8::8"}; !slices.Equal(xff, want) {
		t.Errorf("upstream X-Forwarded-For %q, want %q", xff, want)
	}
	if code, err := ppGet(addr, nil); err == nil {
		t.Errorf("trusted peer without a header (required): answered %d, want the connection closed", code)
	}
	ppRejected(t, g, "invalid", 1)
}

// Attack: connections from (or through) the balancer that send half a
// PROXY header and stall, or a malformed one, to hold the listener's
// accept path.
//
// Bound: the header is read by each connection's own goroutine, not in
// Accept: with 50 connections stalled mid-header (read_header_timeout
// 30s, so they stay stalled throughout) and 10 malformed headers
// (closed, counted), 10 callers are all answered.
func TestProxyProtocolSlowHeader(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startServe(t, ppConfig(t, up.srv.URL, "{trusted: [127.0.0.1]}"))
	addr := hostPort(g.url)
	for i := range 50 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		h := ppV1("198.51.100.1")
		if i%2 == 1 {
			h = ppV2("198.51.100.1")
		}
		if _, err := c.Write(h[:len(h)/2]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		bad := []string{"PROXY TCP4 1.2.3.4 nonsense\r\n", "PROXY " + strings.Repeat("x", 200) + "\r\n"}[i%2]
		if code, err := ppGet(addr, []byte(bad)); err == nil {
			t.Errorf("malformed header %d: answered %d, want the connection closed", i, code)
		}
	}
	answered := 0
	for i := range 10 {
		if code, err := ppGet(addr, ppV2(fmt.Sprintf("203.0.113.%d", i+1))); err == nil && code == http.StatusOK {
			answered++
		}
	}
	if answered != 10 {
		t.Errorf("%d of 10 callers answered beside 50 stalled headers, want 10", answered)
	}
	ppRejected(t, g, "invalid", 10)
}

// ppRejected checks g's count of connections proxy_protocol closed for
// reason.
func ppRejected(t *testing.T, g *gatewayProc, reason string, want float64) {
	t.Helper()
	if n := scrape(t, g.admin).value(t, "sluice_gateway_proxy_protocol_rejected_total", `reason="`+reason+`"`); n != want {
		t.Errorf("proxy_protocol_rejected_total{reason=%s} = %v, want %v", reason, n, want)
	}
}
