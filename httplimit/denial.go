package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDenialBody is the longest body a Denial may carry, in bytes.
const MaxDenialBody = 4096

// DefaultDenialContentType is the content type of a Denial's body when
// none is given.
const DefaultDenialContentType = "text/plain; charset=utf-8"

// Denial is a configured answer to a caller over its limit, in place of
// the problem+json body: Envoy's rate_limited_status, Kong's
// error_code/error_message, nginx's limit_req_status. It applies to the
// refusals of the rate limits (Middleware.Denial) and of the in-flight
// cap (InFlight.Denial) over a limit (OverLimit) only: a store that
// cannot decide (Unavailable) and the shedders' and adaptive limit's
// 503s, which are about the server and not the caller's traffic, keep
// their problem+json answers.
//
// Retry-After and the RateLimit headers are still sent per the layer's
// header mode: Opaque (header.Off) still sends no Retry-After for the
// caller's own limit, whatever the status, and {policy} and
// {retry_after} are then empty and 0.
//
// Build one with NewDenial; the zero Denial and a nil *Denial change
// nothing.
type Denial struct {
	status      int
	contentType string
	escape      func(string) string // for {policy}, per the content type
	parts       []string            // literal, placeholder, literal, ...: odd indexes are placeholders
	size        int                 // the literals' length
}

// The placeholders a Denial's body may hold. Both are the server's
// values, never the client's: the policy's name (from the config) and
// the seconds of Retry-After.
const (
	denialPolicy     = "{policy}"
	denialRetryAfter = "{retry_after}"
)

// NewDenial returns the denial answering status (400-599; 0 keeps the
// layer's) with body, sent with contentType (a media type; "" is
// DefaultDenialContentType). An empty body keeps the problem+json body,
// with status in it. The body is at most MaxDenialBody bytes of UTF-8
// and may hold {policy} (the refusing policy's name, escaped for a JSON
// or HTML content type) and {retry_after} (whole seconds); other braces
// are literal.
func NewDenial(status int, body, contentType string) (*Denial, error) {
	if status != 0 && (status < 400 || status > 599) {
		return nil, fmt.Errorf("status %d: want 400-599 (an error the client sees as a refusal)", status)
	}
	if len(body) > MaxDenialBody {
		return nil, fmt.Errorf("body is %d bytes: at most %d", len(body), MaxDenialBody)
	}
	if !utf8.ValidString(body) {
		return nil, errors.New("body is not valid UTF-8")
	}
	if contentType != "" && body == "" {
		return nil, errors.New("content_type without a body: the default body is application/problem+json")
	}
	d := &Denial{status: status}
	if body == "" {
		return d, nil
	}
	if contentType == "" {
		contentType = DefaultDenialContentType
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.Contains(mt, "/") || strings.ContainsAny(contentType, "\r\n") {
		return nil, fmt.Errorf("content_type %q: want a media type such as application/json", contentType)
	}
	d.contentType = contentType
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		d.escape = jsonEscape
	case mt == "text/html" || mt == "application/xhtml+xml" || strings.HasSuffix(mt, "/xml") || strings.HasSuffix(mt, "+xml"):
		d.escape = html.EscapeString
	}
	d.parts = splitPlaceholders(body)
	for i := 0; i < len(d.parts); i += 2 {
		d.size += len(d.parts[i])
	}
	return d, nil
}

// splitPlaceholders splits body into literal text (even indexes) and the
// placeholders between (odd indexes).
func splitPlaceholders(body string) []string {
	var parts []string
	lit := 0
	for i := 0; i < len(body); i++ {
		if body[i] != '{' {
			continue
		}
		for _, p := range [...]string{denialPolicy, denialRetryAfter} {
			if strings.HasPrefix(body[i:], p) {
				parts = append(parts, body[lit:i], p)
				i += len(p) - 1
				lit = i + 1
				break
			}
		}
	}
	return append(parts, body[lit:])
}

// jsonEscape escapes s for the inside of a JSON string.
func jsonEscape(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x7f || strings.ContainsRune(`"\\<>&`, r) }) {
		return s // the usual policy name: nothing to escape
	}
	b, err := json.Marshal(s)
	if err != nil || len(b) < 2 {
		return ""
	}
	return string(b[1 : len(b)-1])
}

// Status is the denial's status; 0 keeps the layer's.
func (d *Denial) Status() int {
	if d == nil {
		return 0
	}
	return d.status
}

// applies reports whether d changes the answer to rf.
func (d *Denial) applies(rf *Refusal) bool {
	return d != nil && (d.status != 0 || d.parts != nil) && rf.Cause == OverLimit &&
		(rf.Layer == LayerRateLimit || rf.Layer == LayerInFlight)
}

// write writes d's body for a refusal with status, policy and Retry-After
// seconds; the headers (Retry-After, RateLimit) are already set.
func (d *Denial) write(w http.ResponseWriter, status int, policy string, retry int64) {
	b := make([]byte, 0, d.size+(len(d.parts)/2)*(len(policy)+8))
	for i, p := range d.parts {
		switch {
		case i%2 == 0:
			b = append(b, p...)
		case p == denialRetryAfter:
			b = strconv.AppendInt(b, retry, 10)
		case d.escape != nil:
			b = append(b, d.escape(policy)...)
		default:
			b = append(b, policy...)
		}
	}
	h := w.Header()
	h["Content-Type"] = []string{d.contentType}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	w.Write(b)
}
