package h2grpc

import (
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
)

// parseTimeout parses a grpc-timeout value: at most 8 digits and a unit,
// H, M, S, m (milli), u (micro) or n (nano).
func parseTimeout(s string) (time.Duration, error) {
	if len(s) < 2 || len(s) > 9 {
		return 0, errors.New("malformed grpc-timeout")
	}
	unit := timeoutUnits[s[len(s)-1]]
	if unit == 0 {
		return 0, errors.New("malformed grpc-timeout unit")
	}
	var n int64
	for i := 0; i < len(s)-1; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errors.New("malformed grpc-timeout")
		}
		n = n*10 + int64(c-'0')
	}
	// 99999999 hours overflows a Duration: cap it, as grpc-go does.
	if n > int64(maxDuration/unit) {
		return maxDuration, nil
	}
	return time.Duration(n) * unit, nil
}

// timeoutUnits are grpc-timeout's units, by their letter; 0 for any other
// byte.
var timeoutUnits = [256]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
	'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}

// nameByte marks the bytes a header name may hold besides uppercase
// letters (RFC 9110 §5.6.2's tchar).
var nameByte = func() (t [256]bool) {
	for _, c := range []byte("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		t[c] = true
	}
	return t
}()

const maxDuration = time.Duration(1<<63 - 1)

// grpcContentType reports whether v names a gRPC content type:
// application/grpc, optionally followed by +codec or ;parameters.
func grpcContentType(v string) bool {
	const base = "application/grpc"
	if len(v) < len(base) || !strings.EqualFold(v[:len(base)], base) {
		return false
	}
	return len(v) == len(base) || v[len(base)] == '+' || v[len(base)] == ';'
}

// request is what a stream's header block says about its call.
type request struct {
	method      string // :method
	path        string // :path
	scheme      bool   // :scheme was present
	contentType string
	encoding    string // grpc-encoding
	timeout     time.Duration
	hasTimeout  bool
	badTimeout  bool
	malformed   string      // why the block is not a valid request, if it is not
	size        uint32      // the header list's size, as SETTINGS_MAX_HEADER_LIST_SIZE counts it
	regular     bool        // a regular field has been seen (no pseudo-field may follow)
	pseudo      uint8       // the pseudo-fields seen, a bit each
	keep        []string    // Options.Metadata
	md          metadata.MD // the fields of keep seen; nil when none
}

// field records one decoded header field (RFC 9113 §8.2, §8.3).
func (r *request) field(name, value string) {
	r.size += uint32(len(name) + len(value) + 32)
	if r.malformed != "" {
		return
	}
	if name == "" {
		r.malformed = "empty header name"
		return
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			r.malformed = "uppercase header name"
			return
		} else if !nameByte[c] && !(i == 0 && c == ':') {
			r.malformed = "invalid character in header name"
			return
		}
	}
	// RFC 9113 §8.2.1: a value with NUL, CR or LF could split into two
	// headers on its way through an HTTP/1 hop.
	for i := 0; i < len(value); i++ {
		if c := value[i]; c <= '\r' && (c == 0 || c == '\r' || c == '\n') {
			r.malformed = "invalid character in value of header " + name
			return
		}
	}
	if name[0] == ':' {
		if r.regular {
			r.malformed = "pseudo-header after regular header"
			return
		}
		var bit uint8
		switch name {
		case ":method":
			r.method, bit = value, 1
		case ":path":
			r.path, bit = value, 2
		case ":scheme":
			r.scheme, bit = true, 4
		case ":authority":
			bit = 8
		default:
			r.malformed = "unknown pseudo-header " + name
		}
		if r.pseudo&bit != 0 {
			// Which one a proxy in front heeded is anyone's guess (RFC
			// 9113 §8.3: each appears once at most).
			r.malformed = "pseudo-header " + name + " repeated"
		}
		r.pseudo |= bit
		return
	}
	r.regular = true
	switch name {
	case "content-type":
		r.contentType = value
	case "grpc-encoding":
		r.encoding = value
	case "grpc-timeout":
		d, err := parseTimeout(value)
		if err != nil {
			r.badTimeout = true
			return
		}
		r.timeout, r.hasTimeout = d, true
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		r.malformed = "connection-specific header " + name
	case "te":
		if value != "trailers" {
			r.malformed = "te header other than trailers"
		}
	default:
		if r.keep != nil && slices.Contains(r.keep, name) {
			if r.md == nil {
				r.md = metadata.MD{}
			}
			r.md[name] = append(r.md[name], value)
		}
	}
}
