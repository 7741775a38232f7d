package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// ProxyProtocolConfig (proxy_protocol:) has the public listener read the
// PROXY protocol header (v1 or v2) that an L4 load balancer (AWS NLB,
// HAProxy in TCP mode) sends first on each connection, so that the
// client's address, not the balancer's, is the request's RemoteAddr:
// per-IP limits, identity.trusted_proxies and X-Forwarded-For then work
// as for a direct connection.
//
// The header is believed only from Trusted peers. From any other peer
// it is never read: with Required the connection is closed at accept;
// without, the connection is served as it is, so a forged header is a
// malformed request (400) from the peer's own address.
type ProxyProtocolConfig struct {
	// Trusted (trusted) are the balancers' addresses or CIDR prefixes.
	Trusted []netip.Prefix
	// Required (required): a trusted peer's connection without a header
	// is closed, and so is every connection from an untrusted peer.
	// Without it a trusted peer may also connect bare (a balancer's
	// health check), and is then the request's address itself.
	Required bool
}

// String describes p for logs ("off" when nil).
func (p *ProxyProtocolConfig) String() string {
	if p == nil {
		return "off"
	}
	return "trusted=" + strings.Join(prefixStrings(p.Trusted), ",") + " required=" + strconv.FormatBool(p.Required)
}

func prefixStrings(ps []netip.Prefix) []string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return s
}

func (d *decoder) proxyProtocol(n *yaml.Node) *ProxyProtocolConfig {
	p := &ProxyProtocolConfig{}
	d.fields(n, "proxy_protocol", map[string]func(k, v *yaml.Node){
		"trusted":  func(k, v *yaml.Node) { p.Trusted = d.prefixes(v, yamlnode.Join("proxy_protocol", "trusted")) },
		"required": func(k, v *yaml.Node) { p.Required = d.boolean(v, yamlnode.Join("proxy_protocol", "required")) },
	})
	if len(p.Trusted) == 0 {
		d.add(n.Line, "proxy_protocol.trusted", "list the load balancers' addresses: the header is believed only from them")
	}
	return p
}

// The PROXY protocol's bounds: a v1 header is one line of at most 107
// bytes (its specification's bound); a v2 header is 16 bytes and at most
// maxProxyV2Len more (addresses and TLVs; a TCP over IPv6 header needs
// 36, AWS's and HAProxy's TLVs a few dozen more).
const (
	maxProxyV1Len = 107
	maxProxyV2Len = 1024
)

var (
	proxyV1Sig = []byte("PROXY ")
	proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

	errProxyNeedMore = errors.New("proxy protocol: incomplete header")
)

// parseProxyHeader reads the PROXY header at the start of b. It returns
// the header's length n and the client's address src (invalid for a v2
// LOCAL header, v1 UNKNOWN, or a family other than TCP: the peer's own
// address stands); n == 0 with a nil error when b does not start with a
// header; errProxyNeedMore when b is a header's incomplete start; any
// other error for a malformed or oversized header.
func parseProxyHeader(b []byte) (src netip.AddrPort, n int, err error) {
	switch {
	case len(b) == 0:
		return src, 0, errProxyNeedMore
	case hasPrefixOrIs(b, proxyV2Sig):
		if len(b) < 16 {
			return src, 0, errProxyNeedMore
		}
		return parseProxyV2(b)
	case hasPrefixOrIs(b, proxyV1Sig):
		if len(b) < len(proxyV1Sig) {
			return src, 0, errProxyNeedMore
		}
		return parseProxyV1(b)
	}
	return src, 0, nil
}

// hasPrefixOrIs reports whether b starts with sig, or is sig's start.
func hasPrefixOrIs(b, sig []byte) bool {
	m := min(len(b), len(sig))
	return bytes.Equal(b[:m], sig[:m])
}

func parseProxyV1(b []byte) (src netip.AddrPort, n int, err error) {
	i := bytes.IndexByte(b[:min(len(b), maxProxyV1Len)], '\n')
	if i < 0 {
		if len(b) >= maxProxyV1Len {
			return src, 0, errors.New("proxy protocol: v1 header over 107 bytes")
		}
		return src, 0, errProxyNeedMore
	}
	if i == 0 || b[i-1] != '\r' {
		return src, 0, errors.New("proxy protocol: v1 header not ended by CRLF")
	}
	f := strings.Split(string(b[len(proxyV1Sig):i-1]), " ")
	if f[0] == "UNKNOWN" {
		return src, i + 1, nil
	}
	if len(f) != 5 || (f[0] != "TCP4" && f[0] != "TCP6") {
		return src, 0, errors.New("proxy protocol: v1 header not TCP4, TCP6 or UNKNOWN with two addresses and two ports")
	}
	var a [2]netip.Addr
	for j, s := range f[1:3] {
		if a[j], err = netip.ParseAddr(s); err != nil || a[j].Zone() != "" || a[j].Is4() != (f[0] == "TCP4") {
			return src, 0, errors.New("proxy protocol: v1 address not of its family")
		}
	}
	var port [2]uint64
	for j, s := range f[3:5] {
		if port[j], err = strconv.ParseUint(s, 10, 16); err != nil || len(s) > 5 {
			return src, 0, errors.New("proxy protocol: v1 port not 0-65535")
		}
	}
	return netip.AddrPortFrom(a[0], uint16(port[0])), i + 1, nil
}

func parseProxyV2(b []byte) (src netip.AddrPort, n int, err error) {
	if b[12]>>4 != 2 {
		return src, 0, errors.New("proxy protocol: v2 header of another version")
	}
	l := int(binary.BigEndian.Uint16(b[14:16]))
	if l > maxProxyV2Len {
		return src, 0, errors.New("proxy protocol: v2 header over its bound")
	}
	n = 16 + l
	if len(b) < n {
		return src, 0, errProxyNeedMore
	}
	switch b[12] & 0xf {
	case 0: // LOCAL: the balancer's own connection (a health check)
		return src, n, nil
	case 1: // PROXY
	default:
		return src, 0, errors.New("proxy protocol: v2 command neither LOCAL nor PROXY")
	}
	a := b[16:n]
	switch b[13] {
	case 0x11: // TCP over IPv4
		if l < 12 {
			return src, 0, errors.New("proxy protocol: v2 IPv4 addresses cut short")
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[0:4])), binary.BigEndian.Uint16(a[8:10])), n, nil
	case 0x21: // TCP over IPv6
		if l < 36 {
			return src, 0, errors.New("proxy protocol: v2 IPv6 addresses cut short")
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[0:16])), binary.BigEndian.Uint16(a[32:34])), n, nil
	case 0x00, 0x31: // UNSPEC, UNIX stream: the peer's own address stands
		return src, n, nil
	}
	return src, 0, errors.New("proxy protocol: v2 family not TCP")
}

// proxyListener reads the PROXY header of trusted peers' connections.
// Accept reads nothing (a slow peer must not hold it): a connection reads
// its header on first use (RemoteAddr, Read, a deadline), in the
// goroutine serving it, within timeout.
type proxyListener struct {
	net.Listener
	cfg     *ProxyProtocolConfig
	timeout time.Duration
	refused prometheus.Counter // untrusted peers refused (required)
	invalid prometheus.Counter // headers malformed, missing (required) or late; not a connection closed before its first byte
}

func (ln *proxyListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if peerTrusted(c.RemoteAddr().String(), ln.cfg.Trusted) {
			return &proxyConn{Conn: c, ln: ln}, nil
		}
		if !ln.cfg.Required {
			return c, nil
		}
		ln.refused.Inc() // before the close its peer sees
		c.Close()
	}
}

// proxyConn is a trusted peer's connection: its RemoteAddr is the
// header's client once the header is read.
type proxyConn struct {
	net.Conn
	ln     *proxyListener
	once   sync.Once
	remote net.Addr
	rest   []byte // read past the header
	err    error  // the header's, returned by Read
}

func (c *proxyConn) init() { c.once.Do(c.readHeader) }

func (c *proxyConn) readHeader() {
	c.remote = c.Conn.RemoteAddr()
	c.Conn.SetReadDeadline(time.Now().Add(c.ln.timeout))
	defer c.Conn.SetReadDeadline(time.Time{})
	buf := make([]byte, 0, 256) // a v1 header, a v2 one with short TLVs
	for {
		src, n, err := parseProxyHeader(buf)
		if errors.Is(err, errProxyNeedMore) && len(buf) == cap(buf) && cap(buf) < 16+maxProxyV2Len {
			buf = append(make([]byte, 0, 16+maxProxyV2Len), buf...)
		}
		if errors.Is(err, errProxyNeedMore) && len(buf) < cap(buf) {
			m, rerr := c.Conn.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+m]
			if m > 0 {
				continue
			}
			err = rerr
			if err == nil {
				continue
			}
		}
		if err == nil && n == 0 && c.ln.cfg.Required {
			err = errors.New("proxy protocol: no header from a trusted peer, and one is required")
		}
		if err != nil {
			c.err = err
			if len(buf) > 0 || !errors.Is(err, io.EOF) { // not a balancer's bare TCP check
				c.ln.invalid.Inc()
			}
			c.Conn.Close()
			return
		}
		if src.IsValid() {
			c.remote = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src.Addr().Unmap(), src.Port()))
		}
		if n < len(buf) {
			c.rest = buf[n:]
		}
		return
	}
}

func (c *proxyConn) RemoteAddr() net.Addr { c.init(); return c.remote }

func (c *proxyConn) Read(p []byte) (int, error) {
	c.init()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		if len(c.rest) == 0 {
			c.rest = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *proxyConn) SetDeadline(t time.Time) error     { c.init(); return c.Conn.SetDeadline(t) }
func (c *proxyConn) SetReadDeadline(t time.Time) error { c.init(); return c.Conn.SetReadDeadline(t) }
