package action

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
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

// AppendEntries appends to dst the entries d's actions produce for r and
// id, in order. ok is false when an action produced nothing: then, as in
// Envoy, the descriptor is not sent, and dst is returned as it was. An
// action may produce an entry with an empty key (none is appended).
func (d Descriptor) AppendEntries(dst []rules.Entry, r *http.Request, id identity.Identity) (out []rules.Entry, ok bool) {
	start := len(dst)
	for _, a := range d.Actions {
		e, produced := a.Entry(r, id)
		if !produced {
			return dst[:start], false
		}
		if e.Key != "" {
			dst = append(dst, e)
		}
	}
	return dst, true
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
	return matchEntry(allMatch(r, a.Headers) != a.DontExpectMatch, keyOr(a.DescriptorKey, "header_match"), a.DescriptorValue)
}

// allMatch reports whether every matcher of ms matches r.
func allMatch[M interface{ Match(*http.Request) bool }](r *http.Request, ms []M) bool {
	for i := range ms {
		if !ms[i].Match(r) {
			return false
		}
	}
	return true
}

// matchEntry is the entry key=value of a value-match action
// (header_value_match, query_parameter_value_match), or none when its
// matchers did not come out as it expects (ok false).
func matchEntry(ok bool, key, value string) (rules.Entry, bool) {
	if !ok {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: key, Value: value}, true
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

// IdentityKey is sluice's identity action, the usual model: an
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
var ErrHeaderName = errors.New("action: bad header name")

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

// Check checks the header names a reads ([RequestHeaders]'
// HeaderName, the names of [HeaderValueMatch]'s matchers) with
// [CheckHeader], the name of a [Cookie] (an RFC 6265 token), the names
// of [QueryParameters] and [QueryParameterValueMatch]'s matchers (not
// empty) and [MaskedRemoteAddress]'s prefix lengths. Each problem's Path is relative to the action, in the
// names of Envoy's config ("request_headers.header_name",
// "header_value_match.headers[1].name"); File and Line are the caller's
// to fill in. Problems make the action useless; warnings may not.
func Check(a Action) (warnings, problems []rules.Problem) {
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

// MaskedRemoteAddress is Envoy's masked_remote_address action: the entry
// masked_remote_address=<client IP masked to a prefix>, written as Envoy
// writes it ("10.1.2.0/24", "2001:db8:1::/48"). The client IP is the
// identity's, as for [RemoteAddress] (the peer, or the right-most
// untrusted X-Forwarded-For hop behind a trusted proxy); the resolver's
// IPv6 grouping does not apply, the masks here do.
//
// V4PrefixMaskLen (1–32) and V6PrefixMaskLen (1–128) are the prefix
// lengths kept; 0 means Envoy's default, the whole address (32 and 128,
// which still gives "10.1.2.3/32"). Envoy also accepts an explicit 0,
// which puts every client in one key; sluice's gateway refuses it (use
// generic_key for one shared key).
type MaskedRemoteAddress struct {
	V4PrefixMaskLen int
	V6PrefixMaskLen int
}

// Entry implements Action.
func (a MaskedRemoteAddress) Entry(r *http.Request, id identity.Identity) (rules.Entry, bool) {
	ip := id.IP.WithZone("")
	if !ip.IsValid() {
		return rules.Entry{}, false
	}
	bits := 0
	if ip.Is4() {
		bits = a.V4PrefixMaskLen
		if bits <= 0 || bits > 32 {
			bits = 32
		}
	} else {
		bits = a.V6PrefixMaskLen
		if bits <= 0 || bits > 128 {
			bits = 128
		}
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: "masked_remote_address", Value: p.String()}, true
}

// QueryParameters is Envoy's query_parameters action: the entry
// DescriptorKey=<value of the query parameter QueryParameterName>, its
// first value when the query has several, percent-decoded ("a%20b" is
// "a b"; "a+b" stays "a+b", as in Envoy). A parameter given without a value ("?debug" or "?debug=") gives
// an entry with an empty value, as in Envoy. When the parameter is absent
// the descriptor is dropped, or with SkipIfAbsent only this entry is.
//
// The query is the client's: limiting per query parameter alone lets a
// client choose its own counter. Pair it with an identity or address.
type QueryParameters struct {
	QueryParameterName string
	DescriptorKey      string
	SkipIfAbsent       bool
}

// Entry implements Action.
func (a QueryParameters) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	v, ok := QueryValue(r, a.QueryParameterName)
	if !ok {
		return rules.Entry{}, a.SkipIfAbsent
	}
	return rules.Entry{Key: a.DescriptorKey, Value: v}, true
}

// QueryValue returns the first value of the query parameter name in r's
// URL, decoded, and whether the query has that parameter, reading the
// query as Envoy does (QueryParamsMulti::parseAndDecodeQueryString):
// parameters are separated by "&", a parameter without "=" is present
// with an empty value, and names and values are percent-decoded escape by
// escape, a malformed escape kept as written and "+" kept as "+". (Go's
// url.ParseQuery drops a parameter with a malformed escape, which would
// let "?user=%zz&user=bob" choose which value counts.) Names are matched
// exactly, case included.
func QueryValue(r *http.Request, name string) (string, bool) {
	if r.URL == nil {
		return "", false
	}
	q := r.URL.RawQuery
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if decodeQuery(k) != name {
			continue
		}
		return decodeQuery(v), true
	}
	return "", false
}

// decodeQuery percent-decodes s as Envoy's PercentEncoding::decode: each
// valid %XX is decoded, anything else (a malformed escape, "+") is kept.
func decodeQuery(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// QueryParameterValueMatch is Envoy's query_parameter_value_match action:
// the entry DescriptorKey=DescriptorValue (DescriptorKey defaulting to
// "query_match") when every query parameter matcher matches, or, with
// DontExpectMatch, when they do not all match. Otherwise the descriptor is
// dropped. It mirrors [HeaderValueMatch].
type QueryParameterValueMatch struct {
	DescriptorKey   string
	DescriptorValue string
	// DontExpectMatch inverts the action (Envoy's expect_match: false).
	DontExpectMatch bool
	QueryParameters []QueryParameterMatcher
}

// Entry implements Action.
func (a QueryParameterValueMatch) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	return matchEntry(allMatch(r, a.QueryParameters) != a.DontExpectMatch, keyOr(a.DescriptorKey, "query_match"), a.DescriptorValue)
}

// QueryParameterMatcher matches one query parameter, as Envoy's
// QueryParameterMatcher: its first value ([QueryValue]) must equal Exact,
// start with Prefix, end with Suffix, contain Contains and match
// SafeRegex, each when set (compared ignoring case with IgnoreCase, except
// SafeRegex). With no condition, presence alone matches. Present, when
// set, is Envoy's present_match: the matcher matches when the parameter's
// presence is *Present, whatever its value.
type QueryParameterMatcher struct {
	Name       string
	Exact      string
	Prefix     string
	Suffix     string
	Contains   string
	IgnoreCase bool
	// SafeRegex must match the whole value: the gateway compiles Envoy's
	// safe_regex as ^(?:regex)$, Envoy's RE2 being a full match.
	SafeRegex *regexp.Regexp
	Present   *bool
}

// Match reports whether r satisfies m.
func (m QueryParameterMatcher) Match(r *http.Request) bool {
	v, ok := QueryValue(r, m.Name)
	if m.Present != nil {
		return ok == *m.Present
	}
	if !ok {
		return false
	}
	if m.SafeRegex != nil && !m.SafeRegex.MatchString(v) {
		return false
	}
	val, exact, prefix, suffix, contains := v, m.Exact, m.Prefix, m.Suffix, m.Contains
	if m.IgnoreCase {
		val, exact, prefix, suffix, contains = strings.ToLower(v), strings.ToLower(exact), strings.ToLower(prefix), strings.ToLower(suffix), strings.ToLower(contains)
	}
	switch {
	case exact != "" && val != exact,
		prefix != "" && !strings.HasPrefix(val, prefix),
		suffix != "" && !strings.HasSuffix(val, suffix),
		contains != "" && !strings.Contains(val, contains):
		return false
	}
	return true
}

// CompileSafeRegex compiles an Envoy safe_regex (RE2, which Go's regexp
// is) for [QueryParameterMatcher.SafeRegex]: anchored as ^(?:expr)$, since
// Envoy's regex matchers match the whole value.
func CompileSafeRegex(expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, err // the message quotes expr as written
	}
	return regexp.Compile("^(?:" + expr + ")$")
}

// Cookie is sluice's cookie action (Envoy has none): the entry
// DescriptorKey=<value of the cookie CookieName> (the first cookie of that
// name, as [net/http.Request.Cookie] finds it). When the request has no
// such cookie the descriptor is dropped, or with SkipIfAbsent only this
// entry is. A cookie sent with an empty value ("sid=") gives an entry
// with an empty value.
//
// A cookie is whatever the client sends: limiting per cookie alone lets a
// client mint a fresh counter per request. Use it beside the client's
// address (remote_address, then cookie: the usual answer to carrier-grade
// NAT, where many users share one IP), so that a client cannot escape its
// address's share by changing cookies.
type Cookie struct {
	CookieName    string
	DescriptorKey string
	SkipIfAbsent  bool
}

// Entry implements Action.
func (a Cookie) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	c, err := r.Cookie(a.CookieName)
	if err != nil {
		return rules.Entry{}, a.SkipIfAbsent
	}
	return rules.Entry{Key: a.DescriptorKey, Value: c.Value}, true
}

// checkNewAction is Check's part for masked_remote_address,
// query_parameters, query_parameter_value_match and cookie.
func checkNewAction(a Action) (problems []rules.Problem) {
	add := func(path, format string, args ...any) {
		problems = append(problems, rules.Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	switch x := a.(type) {
	case *MaskedRemoteAddress:
		if x != nil {
			return checkNewAction(*x)
		}
	case *QueryParameters:
		if x != nil {
			return checkNewAction(*x)
		}
	case *QueryParameterValueMatch:
		if x != nil {
			return checkNewAction(*x)
		}
	case *Cookie:
		if x != nil {
			return checkNewAction(*x)
		}
	case MaskedRemoteAddress:
		if x.V4PrefixMaskLen < 0 || x.V4PrefixMaskLen > 32 {
			add("masked_remote_address.v4_prefix_mask_len", "want a prefix length from 1 to 32, got %d", x.V4PrefixMaskLen)
		}
		if x.V6PrefixMaskLen < 0 || x.V6PrefixMaskLen > 128 {
			add("masked_remote_address.v6_prefix_mask_len", "want a prefix length from 1 to 128, got %d", x.V6PrefixMaskLen)
		}
	case QueryParameters:
		if x.QueryParameterName == "" {
			add("query_parameters.query_parameter_name", "empty query parameter name")
		}
	case QueryParameterValueMatch:
		for i, m := range x.QueryParameters {
			if m.Name == "" {
				add(fmt.Sprintf("query_parameter_value_match.query_parameters[%d].name", i), "empty query parameter name")
			}
		}
	case Cookie:
		if p := checkCookieName(x.CookieName); p != "" {
			add("cookie.cookie_name", "%s", p)
		}
	}
	return problems
}

// checkCookieName reports why name can never be a request's cookie name
// ("" when it can): Go's Request.Cookie only finds names that are RFC 6265
// tokens.
func checkCookieName(name string) string {
	if name == "" {
		return "empty cookie name"
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return fmt.Sprintf("%q is not a cookie name (an RFC 6265 token): no request's cookie can match it", name)
		}
	}
	return ""
}
