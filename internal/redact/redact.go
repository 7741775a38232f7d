package redact

import (
	"errors"
	"strconv"
	"strings"
)

// Mask replaces a secret.
const Mask = "xxxxx"

// ErrUnencoded says that a URL's password holds a character a URL parser
// cuts it at: '#', '?' or '/', or a '%' that does not start an escape.
var ErrUnencoded = errors.New("the password holds an unencoded #, ?, / or %: percent-encode it (%23, %3F, %2F, %25)")

// URL returns raw with its password replaced by Mask: in
// scheme://user:password@host…, scheme://:password@host…, a host list
// (redis-cluster://user:password@h1:p1,h2:p2) and a DSN without a scheme
// (user:password@tcp(host)/db). The values of query parameters whose name
// holds a secret (password=, token=, …: Secret) are masked too. A string
// without a password is returned as it is.
func URL(raw string) string {
	start, colon, at := userinfo(raw)
	out, q := raw, 0
	if colon >= 0 {
		out = raw[:colon+1] + Mask + raw[at:]
		q = colon + 1 + len(Mask) + 1
	} else if at >= 0 {
		q = at + 1
	} else {
		q = start
	}
	return maskQuery(out, q)
}

// userinfo finds raw's password: it runs from the first ':' after the
// scheme (colon) to the last '@' (at). colon is -1 when raw has no
// password, at -1 when it has no '@'; start is where the authority
// starts.
func userinfo(raw string) (start, colon, at int) {
	if i := strings.Index(raw, "://"); i > 0 && scheme(raw[:i]) {
		start = i + 3
	}
	at = strings.LastIndexByte(raw[start:], '@')
	if at < 0 {
		return start, -1, -1
	}
	at += start
	colon = strings.IndexByte(raw[start:at], ':')
	if colon < 0 {
		return start, -1, at
	}
	return start, start + colon, at
}

// maskQuery masks the secret parameters of the query of s after offset
// from.
func maskQuery(s string, from int) string {
	i := strings.IndexByte(s[from:], '?')
	if i < 0 {
		return s
	}
	head, query := s[:from+i+1], s[from+i+1:]
	frag := ""
	if j := strings.IndexByte(query, '#'); j >= 0 {
		query, frag = query[:j], query[j:]
	}
	params := strings.Split(query, "&")
	changed := false
	for k, p := range params {
		name, _, ok := strings.Cut(p, "=")
		if ok && Secret(name) {
			params[k], changed = name+"="+Mask, true
		}
	}
	if !changed {
		return s
	}
	return head + strings.Join(params, "&") + frag
}

// secrets returns the secret substrings of raw that URL masks.
func secrets(raw string) []string {
	var out []string
	start, colon, at := userinfo(raw)
	q := start
	if colon >= 0 {
		if p := raw[colon+1 : at]; p != "" {
			out = append(out, p)
		}
	}
	if at >= 0 {
		q = at + 1
	}
	if i := strings.IndexByte(raw[q:], '?'); i >= 0 {
		query, _, _ := strings.Cut(raw[q+i+1:], "#")
		for _, p := range strings.Split(query, "&") {
			if name, v, ok := strings.Cut(p, "="); ok && v != "" && Secret(name) {
				out = append(out, v)
			}
		}
	}
	return out
}

// scheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' and '.'): a "://" after anything else is in
// a DSN's password, not after its scheme.
func scheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// unencoded reports whether password p holds a character a URL parser
// cuts it at.
func unencoded(p string) bool {
	if strings.ContainsAny(p, "#?/") {
		return true
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && (i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2])) {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Error returns err, about raw, with raw's secrets masked in its text
// (and the quoted forms of them that net/url's errors show). When raw's
// password is not encoded (ErrUnencoded), the parser that failed cut the
// URL inside the password and showed pieces of it: Error then returns
// ErrUnencoded instead. The result wraps err for errors.Is and
// errors.As; a nil err is nil.
func Error(raw string, err error) error {
	if err == nil {
		return nil
	}
	s := secrets(raw)
	if len(s) == 0 {
		return err
	}
	if _, colon, at := userinfo(raw); colon >= 0 && unencoded(raw[colon+1:at]) {
		return &masked{msg: ErrUnencoded.Error(), err: ErrUnencoded}
	}
	msg := err.Error()
	for _, v := range s {
		// The quoted form first: it may hold the plain one.
		if q := strconv.Quote(v); q[1:len(q)-1] != v {
			msg = strings.ReplaceAll(msg, q[1:len(q)-1], Mask)
		}
		msg = strings.ReplaceAll(msg, v, Mask)
	}
	if msg == err.Error() {
		return err
	}
	return &masked{msg: msg, err: err}
}

type masked struct {
	msg string
	err error
}

func (m *masked) Error() string { return m.msg }
func (m *masked) Unwrap() error { return m.err }

// Secret reports whether a flag, environment variable or URL parameter
// named name holds a secret, whose value is never printed: its name holds
// password, passwd, secret, token or auth (REDIS_AUTH,
// REDIS_SENTINEL_AUTH, --store-password, SLUICE_STORE_PASSWORD; a
// variable naming a file, *_FILE, holds a path and is printed).
func Secret(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "_file") || strings.HasSuffix(n, "-file") {
		return false
	}
	for _, s := range []string{"password", "passwd", "secret", "token", "auth"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// Value returns v fit to print as the value of the flag or variable name:
// Mask when name holds a secret (Secret), else v with any URL password in
// it masked (URL).
func Value(name, v string) string {
	if Secret(name) {
		return Mask
	}
	return URL(v)
}
