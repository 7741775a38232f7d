package httplimit

import (
	"net/http"
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
// ([RemoteAddress], [RequestHeaders], [GenericKey], [HeaderValueMatch]) and
// sluice's own ([IdentityKey], [Tier], [Method], [Path]).
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
// DescriptorKey=<value of HeaderName>. When the header is absent the
// descriptor is dropped, or with SkipIfAbsent only this entry is.
type RequestHeaders struct {
	HeaderName    string
	DescriptorKey string
	SkipIfAbsent  bool
}

// Entry implements Action.
func (a RequestHeaders) Entry(r *http.Request, _ identity.Identity) (rules.Entry, bool) {
	v := r.Header.Get(a.HeaderName)
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
		if !m.Match(r.Header) {
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
// header Name must be present and, when set, equal Exact, start with
// Prefix, end with Suffix and contain Contains. With Present false and no
// other condition, presence alone matches. Invert negates the result.
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

// Match reports whether h satisfies m.
func (m HeaderMatcher) Match(h http.Header) bool {
	vs := h.Values(m.Name)
	ok := len(vs) > 0
	if m.Absent {
		ok = !ok
	} else if ok {
		v := strings.Join(vs, ",")
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
