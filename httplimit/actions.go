package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/rules"
)

// Action produces one entry of a descriptor from a request and its caller.
// ok false drops the whole descriptor (Envoy's behaviour when an action
// cannot produce its entry); an entry with an empty Key is skipped while the
// rest of the descriptor is kept.
//
// The actions in this package are Envoy's rate_limits actions
// ([RemoteAddress], [MaskedRemoteAddress], [RequestHeaders],
// [QueryParameters], [GenericKey], [HeaderValueMatch],
// [QueryParameterValueMatch]) and sluice's own ([IdentityKey], [Tier],
// [Method], [Path], [Cookie]).
type Action interface {
	Entry(r *http.Request, id identity.Identity) (e rules.Entry, ok bool)
}

// Descriptor is an ordered list of actions; their entries, in order, are
// one descriptor matched against the rules.
type Descriptor struct {
	Actions []Action
}

func keyOr(k, def string) string {
	if k == "" {
		return def
	}
	return k
}

// RemoteAddress is Envoy's remote_address action: the entry
// remote_address=<client IP>. The client IP is the identity's IP (the
// peer's address, or the right-most untrusted X-Forwarded-For hop when the
// peer is a trusted proxy), or its IPv6 prefix ("2001:db8:1:2::/64") when
// the resolver groups IPv6 clients by prefix.
type RemoteAddress struct{}

// Entry implements Action.
func (RemoteAddress) Entry(r *http.Request, id identity.Identity) (rules.Entry, bool) {
	if !id.IP.IsValid() {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: "remote_address", Value: clientIP(id)}, true
}

// clientIP is the anonymous caller's limiting key without its "ip:"
// prefix: the address, or its IPv6 prefix.
func clientIP(id identity.Identity) string {
	if id.IP.Is4() {
		return id.IP.String()
	}
	id.Authenticated = false
	return strings.TrimPrefix(id.Key(), "ip:")
}

// RequestHeaders is Envoy's request_headers action: the entry
// DescriptorKey=<value of HeaderName> (its first value when the request
// has several). When the header is absent the descriptor is dropped, or
// with SkipIfAbsent only this entry is. HeaderName may be Host or a
// pseudo-header, read as Envoy reads them; see [HeaderValue].
type RequestHeaders struct {
	HeaderName    string
	DescriptorKey string
	SkipIfAbsent  bool
}

// Entry implements Action.
func (a RequestHeaders) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	v, _ := firstValue(r, a.HeaderName)
	if v == "" {
		if a.SkipIfAbsent {
			return rules.Entry{}, true
		}
		return rules.Entry{}, false
	}
	return rules.Entry{Key: a.DescriptorKey, Value: v}, true
}

// GenericKey is Envoy's generic_key action: the constant entry
// DescriptorKey=DescriptorValue, DescriptorKey defaulting to "generic_key".
type GenericKey struct {
	DescriptorKey   string
	DescriptorValue string
}

// Entry implements Action.
func (a GenericKey) Entry(*http.Request, identity.Identity) (rules.Entry, bool) {
	return rules.Entry{Key: keyOr(a.DescriptorKey, "generic_key"), Value: a.DescriptorValue}, true
}

// HeaderValueMatch is Envoy's header_value_match action: the entry
// DescriptorKey=DescriptorValue (DescriptorKey defaulting to
// "header_match") when every header matcher matches, or, with
// DontExpectMatch, when they do not all match. Otherwise the descriptor is
// dropped.
type HeaderValueMatch struct {
	DescriptorKey   string
	DescriptorValue string
	// DontExpectMatch inverts the action (Envoy's expect_match: false).
	DontExpectMatch bool
	Headers         []HeaderMatcher
}

// Entry implements Action.
func (a HeaderValueMatch) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	all := true
	for _, m := range a.Headers {
		if !m.Match(r) {
			all = false
			break
		}
	}
	if all == a.DontExpectMatch {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: keyOr(a.DescriptorKey, "header_match"), Value: a.DescriptorValue}, true
}

// HeaderMatcher matches one request header, as Envoy's HeaderMatcher: the
// header Name must be present and, when set, its value (several fields of
// that name joined with ",") must equal Exact, start with Prefix, end with
// Suffix and contain Contains. With no condition, presence alone matches.
// Invert negates the result. Name may be Host or a pseudo-header; see
// [HeaderValue].
type HeaderMatcher struct {
	Name     string
	Exact    string
	Prefix   string
	Suffix   string
	Contains string
	// Absent inverts presence: the matcher matches when the header is
	// absent (Envoy's present_match: false).
	Absent bool
	Invert bool
}

// Match reports whether r satisfies m.
func (m HeaderMatcher) Match(r *http.Request) bool {
	v, ok := HeaderValue(r, m.Name)
	if m.Absent {
		ok = !ok
	} else if ok {
		switch {
		case m.Exact != "" && v != m.Exact:
			ok = false
		case m.Prefix != "" && !strings.HasPrefix(v, m.Prefix):
			ok = false
		case m.Suffix != "" && !strings.HasSuffix(v, m.Suffix):
			ok = false
		case m.Contains != "" && !strings.Contains(v, m.Contains):
			ok = false
		}
	}
	return ok != m.Invert
}

// IdentityKey is sluice's identity action, the seeds' model: an
// authenticated caller gives the entry user=<user ID> (pooled across all
// its devices and addresses), an anonymous one remote_address=<client IP>.
// UserKey and IPKey rename the entries.
type IdentityKey struct {
	UserKey string
	IPKey   string
}

// Entry implements Action.
func (a IdentityKey) Entry(r *http.Request, id identity.Identity) (rules.Entry, bool) {
	if id.Authenticated {
		return rules.Entry{Key: keyOr(a.UserKey, "user"), Value: id.User}, true
	}
	if !id.IP.IsValid() {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: keyOr(a.IPKey, "remote_address"), Value: clientIP(id)}, true
}

// Tier is sluice's tier action: the entry tier=<the caller's tier>. A
// caller without a tier (every anonymous caller) gets Default, or, when
// Default is empty, drops the descriptor.
type Tier struct {
	DescriptorKey string
	Default       string
}

// Entry implements Action.
func (a Tier) Entry(r *http.Request, id identity.Identity) (rules.Entry, bool) {
	t := id.Tier
	if t == "" {
		t = a.Default
	}
	if t == "" {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: keyOr(a.DescriptorKey, "tier"), Value: t}, true
}

// Method is sluice's method action: the entry method=<request method>.
type Method struct {
	DescriptorKey string
}

// Entry implements Action.
func (a Method) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	return rules.Entry{Key: keyOr(a.DescriptorKey, "method"), Value: r.Method}, true
}

// Path is sluice's path action: the entry path=<request URL path>.
type Path struct {
	DescriptorKey string
}

// Entry implements Action.
func (a Path) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	return rules.Entry{Key: keyOr(a.DescriptorKey, "path"), Value: r.URL.Path}, true
}

// HeaderValue returns the value of the request header name as Envoy's
// actions read it, and whether the request has it. Several fields of that
// name are joined with ",".
//
// Envoy reads some request properties as headers that Go's server keeps
// elsewhere, and they are mapped here (Envoy's names are lowercase, but
// the match ignores case):
//
//	:authority, host  r.Host, lowercased and without a trailing dot
//	:path             r.URL's path and query ("/a/b?q=1"), the path in
//	                  Go's escaping of r.URL.Path (see below)
//	:method           r.Method
//	:scheme           "https" when r.TLS is set, else "http"
//	:protocol         the :protocol of an HTTP/2 extended CONNECT
//
// Go's server never shows a handler a Host header (it moves it to r.Host),
// so without this mapping a rule on :authority, :path, :method or host
// would never match and never limit. Host names are case-insensitive and
// "example.com." is "example.com", and a path may be spelled with
// needless escapes ("/ap%69" for "/api"): the values above are canonical
// so that no spelling of the same request gets a counter of its own. The
// path is the one the gateway routes on. The query is part of :path, as
// in Envoy, so a rule on one exact :path does not apply to the same path
// with a query; match a prefix, or use the [Path] action, to ignore it.
//
// Any other name beginning with ":" is not a request's pseudo-header and
// is never present ([CheckHeader] reports it).
func HeaderValue(r *http.Request, name string) (string, bool) {
	if p := pseudoOf(name); p != notPseudo {
		return pseudoValue(r, p)
	}
	vs := r.Header.Values(name)
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// firstValue is HeaderValue's first value when there are several.
func firstValue(r *http.Request, name string) (string, bool) {
	if p := pseudoOf(name); p != notPseudo {
		return pseudoValue(r, p)
	}
	vs := r.Header.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// pseudo names a request property that Envoy reads as a header and Go's
// server does not keep in Request.Header under that name.
type pseudo uint8

const (
	notPseudo pseudo = iota
	authority
	path
	method
	scheme
	protocol
	unknownPseudo
)

// pseudoHeaders are the request pseudo-headers (RFC 9113 section 8.3.1,
// and :protocol of RFC 8441).
var pseudoHeaders = map[string]pseudo{
	":authority": authority, ":path": path, ":method": method, ":scheme": scheme, ":protocol": protocol,
}

func pseudoOf(name string) pseudo {
	if name == "" {
		return notPseudo
	}
	if name[0] != ':' {
		if len(name) == 4 && strings.EqualFold(name, "host") {
			return authority
		}
		return notPseudo
	}
	if p, ok := pseudoHeaders[name]; ok {
		return p
	}
	if p, ok := pseudoHeaders[strings.ToLower(name)]; ok {
		return p
	}
	return unknownPseudo
}

func pseudoValue(r *http.Request, p pseudo) (string, bool) {
	switch p {
	case authority:
		if r.Host == "" {
			return "", false
		}
		return canonicalHost(r.Host), true
	case path:
		if r.URL == nil || (r.Method == http.MethodConnect && r.URL.Path == "") {
			return "", false // a CONNECT to host:port has no path
		}
		return requestPath(r.URL), true
	case method:
		if r.Method == "" {
			return http.MethodGet, true // as net/http reads a client's empty Method
		}
		return r.Method, true
	case scheme:
		if r.TLS != nil {
			return "https", true
		}
		return "http", true
	case protocol:
		// Go's HTTP/2 server keeps it in the header map under its own
		// name, which is not in canonical form.
		if vs := r.Header[":protocol"]; len(vs) > 0 {
			return vs[0], true
		}
	}
	return "", false
}

// canonicalHost lowercases host and drops the trailing dot of its name,
// keeping the port. It does not allocate when host is already canonical.
func canonicalHost(host string) string {
	name, port := host, ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host[i:], ']') < 0 {
		name, port = host[:i], host[i:] // not inside an IPv6 literal
	}
	trimmed := strings.TrimSuffix(name, ".")
	upper := false
	for i := 0; i < len(trimmed); i++ {
		if c := trimmed[i]; 'A' <= c && c <= 'Z' {
			upper = true
			break
		}
	}
	if !upper && len(trimmed) == len(name) {
		return host
	}
	b := make([]byte, 0, len(trimmed)+len(port))
	for i := 0; i < len(trimmed); i++ {
		c := trimmed[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(append(b, port...))
}

// requestPath is u's path, in Go's escaping of the decoded path (so
// "/ap%69" is "/api", as the path the gateway routes on), and its query.
func requestPath(u *url.URL) string {
	if u.Opaque != "" {
		return u.RequestURI()
	}
	c := url.URL{Path: u.Path, RawQuery: u.RawQuery}
	return c.RequestURI()
}

// ErrHeaderName is matched (errors.Is) by the errors of [CheckHeader].
var ErrHeaderName = errors.New("httplimit: bad header name")

// CheckHeader checks the name of a header that an action reads. It
// returns an error (matching [ErrHeaderName]) for a name no request can
// have: a pseudo-header other than :authority, :path, :method, :scheme
// and :protocol, or a name Go's server refuses. It returns a warning for a
// header that a handler never sees, or that only describes the client's
// connection. Host and the pseudo-headers are fine: see [HeaderValue].
//
// Go's server removes Transfer-Encoding from every request (it decodes
// the body), Trailer from every chunked one, and moves Host to r.Host.
// Connection, Keep-Alive, Proxy-Connection, Upgrade and TE are hop-by-hop:
// an HTTP/1.1 client sets them for its connection to this server, and an
// HTTP/2 request cannot carry them (Go's server refuses it; TE may only
// say "trailers").
func CheckHeader(name string) (warning string, err error) {
	warning, problem := checkHeader(name)
	if problem != "" {
		return "", fmt.Errorf("%w: %s", ErrHeaderName, problem)
	}
	return warning, nil
}

func checkHeader(name string) (warning, problem string) {
	if name == "" {
		return "", "empty header name"
	}
	if name[0] == ':' {
		if pseudoOf(name) == unknownPseudo {
			return "", fmt.Sprintf("unknown pseudo-header %q: requests have :authority, :path, :method, :scheme and :protocol", name)
		}
		return "", ""
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return "", fmt.Sprintf("%q is not a header name (an RFC 9110 token): Go's server refuses requests that carry it", name)
		}
	}
	switch k := http.CanonicalHeaderKey(name); k {
	case "Transfer-Encoding":
		return "Go's HTTP server removes Transfer-Encoding from every request (it decodes the body itself): this never sees it", ""
	case "Trailer":
		return "Go's HTTP server removes Trailer from every chunked request (the trailers come after the body, in Request.Trailer): this never sees it", ""
	case "Connection", "Keep-Alive", "Proxy-Connection", "Upgrade":
		return k + " is hop-by-hop: it describes the client's connection, not the request, and an HTTP/2 request cannot carry it", ""
	case "Te":
		return "TE is hop-by-hop: it describes the client's connection, not the request, and an HTTP/2 request can only say \"TE: trailers\"", ""
	}
	return "", ""
}

// isTokenByte reports whether c may appear in a header name: an RFC 9110
// token character.
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckAction checks the header names a reads ([RequestHeaders]'
// HeaderName, the names of [HeaderValueMatch]'s matchers) with
// [CheckHeader], the name of a [Cookie] (an RFC 6265 token), the names
// of [QueryParameters] and [QueryParameterValueMatch]'s matchers (not
// empty) and [MaskedRemoteAddress]'s prefix lengths. Each problem's Path is relative to the action, in the
// names of Envoy's config ("request_headers.header_name",
// "header_value_match.headers[1].name"); File and Line are the caller's
// to fill in. Problems make the action useless; warnings may not.
func CheckAction(a Action) (warnings, problems []rules.Problem) {
	check := func(name, path string) {
		w, p := checkHeader(name)
		if p != "" {
			problems = append(problems, rules.Problem{Path: path, Msg: p})
		}
		if w != "" {
			warnings = append(warnings, rules.Problem{Path: path, Msg: w})
		}
	}
	switch x := a.(type) {
	case *RequestHeaders:
		if x != nil {
			a = *x
		}
	case *HeaderValueMatch:
		if x != nil {
			a = *x
		}
	}
	switch x := a.(type) {
	case RequestHeaders:
		check(x.HeaderName, "request_headers.header_name")
	case HeaderValueMatch:
		for i, m := range x.Headers {
			check(m.Name, fmt.Sprintf("header_value_match.headers[%d].name", i))
		}
	}
	problems = append(problems, checkNewAction(a)...)
	return warnings, problems
}
