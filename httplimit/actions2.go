package httplimit

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/rules"
)

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
	all := true
	for _, m := range a.QueryParameters {
		if !m.Match(r) {
			all = false
			break
		}
	}
	if all == a.DontExpectMatch {
		return rules.Entry{}, false
	}
	return rules.Entry{Key: keyOr(a.DescriptorKey, "query_match"), Value: a.DescriptorValue}, true
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
// address (remote_address, then cookie: the seeds' answer to carrier-grade
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

// checkNewAction is CheckAction's part for the actions of this file.
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
