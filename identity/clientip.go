package identity

import (
	"net/http"
	"net/netip"
	"strings"
)

// maxHops bounds how many forwarding hops ClientIP walks.
const maxHops = 64

// ClientIP returns the client's address for a request whose connection
// peer is remoteAddr ("host:port", as net/http sets RemoteAddr).
//
// When the peer is not in trusted (or trusted is empty) the answer is the
// peer: forwarding headers from anyone else are ignored, so a client cannot
// choose its own address. When the peer is a trusted proxy, the hops of
// X-Forwarded-For (or, when that header is absent, of Forwarded's for=
// parameters) are walked from the right, skipping trusted proxies; the
// first untrusted hop is the client. A hop that cannot be parsed ends the
// walk at the last trusted hop before it; a chain made only of trusted hops
// gives its left-most hop.
//
// Configure trusted proxies to append to X-Forwarded-For (or to set
// Forwarded and strip a client's X-Forwarded-For): the header the proxies
// write is the one that must win. IPv4-mapped IPv6 addresses are unmapped
// and zones dropped. An unparsable peer gives the zero Addr.
func ClientIP(remoteAddr string, h http.Header, trusted []netip.Prefix) netip.Addr {
	a, _ := clientIP(remoteAddr, h, trusted)
	return a
}

// clientIP is ClientIP, and whether the peer is a trusted proxy: one parse
// of remoteAddr for both.
func clientIP(remoteAddr string, h http.Header, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, ok := parseRemoteAddr(remoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if len(trusted) == 0 || !isTrusted(peer, trusted) {
		return peer, false
	}
	return forwarded(peer, h, trusted), true
}

// forwarded walks the forwarding headers that trusted proxy peer passed
// on; see ClientIP.
func forwarded(peer netip.Addr, h http.Header, trusted []netip.Prefix) netip.Addr {
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		// Walk right to left without splitting: no allocation.
		cur, n := peer, 0
		for li := len(xff) - 1; li >= 0; li-- {
			line := xff[li]
			for end := len(line); end >= 0; {
				start := strings.LastIndexByte(line[:end], ',') + 1
				hop := strings.TrimSpace(line[start:end])
				if n++; n > maxHops {
					return cur
				}
				a, ok := parseHop(hop)
				if !ok {
					return cur
				}
				if !isTrusted(a, trusted) {
					return a
				}
				cur = a
				end = start - 1
			}
		}
		return cur
	}
	hops := forwardedFor(h)
	cur := peer
	for i := len(hops) - 1; i >= 0 && len(hops)-i <= maxHops; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return cur
		}
		if !isTrusted(a, trusted) {
			return a
		}
		cur = a
	}
	return cur
}

func isTrusted(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor returns the for= values of Forwarded, left to right.
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, line := range h.Values("Forwarded") {
		for _, elem := range splitQuoted(line, ',') {
			hop := "" // an element without for= is a hop we cannot place
			for _, pair := range splitQuoted(elem, ';') {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					hop = unquote(strings.TrimSpace(v))
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
		if strings.IndexByte(s, '\\') >= 0 {
			var b strings.Builder
			for i := 0; i < len(s); i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			s = b.String()
		}
	}
	return s
}

// parseHop parses one hop: "192.0.2.1", "192.0.2.1:80", "2001:db8::1",
// "[2001:db8::1]", "[2001:db8::1]:443".
func parseHop(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return clean(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return clean(ap.Addr()), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return clean(a), true
		}
	}
	return netip.Addr{}, false
}

// parseRemoteAddr parses net/http's RemoteAddr ("ip:port"; a bare IP is
// accepted too).
func parseRemoteAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return clean(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return clean(a), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return clean(a), true
		}
	}
	return netip.Addr{}, false
}

func clean(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }
