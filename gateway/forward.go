package gateway

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/identity"
)

// The gateway resolves the caller once per request, before limiting (see
// routeHandler): the identity goes into the request's context, where the
// limiting middleware finds it (cachedIdentity is its Identifier) and the
// proxy's Rewrite forwards it upstream. Resolving before the middleware
// also means that a presented and wrong credential is answered 401 on
// every route, limited or not: the gateway never forwards a request as
// anonymous when it carried a credential it refused.

type identityKey struct{}

// failureKey finds the identityContext below a context derived from it.
type failureKey struct{}

// identityContext is a request's context carrying the identity the
// gateway resolved: one allocation where context.WithValue and the
// escaping identity took two. It also records whether the proxy answered
// the request itself (markFailure), for the route's refund_on.
type identityContext struct {
	context.Context
	id           identity.Identity
	failed       atomic.Uint32 // GatewayFailures
	method, path string        // the request's, for the access log (requestOf)
}

func (c *identityContext) Value(key any) any {
	switch key.(type) {
	case identityKey:
		return &c.id
	case failureKey:
		return c
	}
	return c.Context.Value(key)
}

// markFailure records that the proxy answered the request of ctx itself
// with failure f (its 504 or its 502).
func markFailure(ctx context.Context, f GatewayFailures) {
	if c, ok := ctx.Value(failureKey{}).(*identityContext); ok {
		c.failed.Store(uint32(f))
	}
}

// failureOf returns the failure markFailure recorded for the request of
// ctx, or 0 when the response is the upstream's (or not the proxy's).
func failureOf(ctx context.Context) GatewayFailures {
	if c, ok := routed(ctx); ok {
		return GatewayFailures(c.failed.Load())
	}
	return 0
}

// requestOf returns the method and path of the routed request of ctx
// ("" when ctx is none's).
func requestOf(ctx context.Context) (method, path string) {
	if c, ok := routed(ctx); ok {
		return c.method, c.path
	}
	return "", ""
}

// routed returns the identityContext of ctx or below it.
func routed(ctx context.Context) (*identityContext, bool) {
	if ctx == nil {
		return nil, false
	}
	c, ok := ctx.(*identityContext) // the usual case: no walk up the chain
	if !ok {
		c, ok = ctx.Value(failureKey{}).(*identityContext)
	}
	return c, ok
}

// withIdentity returns ctx carrying id (and room for the request's
// method and path).
func withIdentity(ctx context.Context, id identity.Identity) *identityContext {
	return &identityContext{Context: ctx, id: id}
}

// identityFrom returns the identity the gateway resolved for a request.
func identityFrom(ctx context.Context) (*identity.Identity, bool) {
	if c, ok := ctx.(*identityContext); ok { // the usual case: no walk up the chain
		return &c.id, true
	}
	id, ok := ctx.Value(identityKey{}).(*identity.Identity)
	return id, ok
}

// cachedIdentity is the limiting middleware's Identifier: the identity
// routeHandler resolved, else (a request that did not come through it)
// the resolver's answer.
type cachedIdentity struct{ *identity.Resolver }

func (c cachedIdentity) Resolve(r *http.Request) (identity.Identity, error) {
	if id, ok := identityFrom(r.Context()); ok {
		return *id, nil
	}
	return c.Resolver.Resolve(r)
}

// headerSet is a set of header names compared as a CGI gateway does:
// case-insensitive and with "_" the same as "-" (PHP, WSGI and Rack read
// both X-User and X_User as HTTP_X_USER, so stripping only one would let
// the other through).
type headerSet map[string]bool

func newHeaderSet(names ...string) headerSet {
	s := headerSet{}
	for _, n := range names {
		if n != "" {
			s[cgiName(n)] = true
		}
	}
	return s
}

func cgiName(n string) string {
	return strings.ReplaceAll(strings.ToLower(n), "_", "-")
}

// contains reports whether the header name k is in s, under any
// spelling. It runs for every header of every proxied request, so it
// spells k's CGI name in a buffer on the stack (a map lookup of
// string(bytes) does not allocate) instead of allocating it; a long or
// non-ASCII name, which a client cannot send (net/http refuses header
// names that are not tokens), takes cgiName.
func (s headerSet) contains(k string) bool {
	var buf [64]byte
	if len(k) > len(buf) {
		return s[cgiName(k)]
	}
	b := buf[:len(k)]
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 0x80:
			return s[cgiName(k)]
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c == '_':
			b[i] = '-'
		default:
			b[i] = c
		}
	}
	return s[string(b)]
}

// has reports whether h has a header in s, under any spelling.
func (s headerSet) has(h http.Header) bool {
	for k := range h {
		if s.contains(k) {
			return true
		}
	}
	return false
}

// remove deletes every header of s from h, under any spelling.
func (s headerSet) remove(h http.Header) {
	for k := range h {
		if s.contains(k) {
			delete(h, k)
		}
	}
}

// identityHeaders is what the gateway does to a request's identity
// headers: strip is removed before limiting from requests whose peer is
// not a trusted proxy; owned is removed from every proxied request, and
// the resolved identity set in user, tier and kind.
type identityHeaders struct {
	trusted []netip.Prefix
	strip   headerSet
	owned   headerSet
	user    string
	tier    string
	kind    string
}

func newIdentityHeaders(ic IdentityConfig) *identityHeaders {
	canon := http.CanonicalHeaderKey
	h := &identityHeaders{
		trusted: ic.TrustedProxies,
		strip:   newHeaderSet(append([]string{ic.UserHeader, ic.TierHeader}, ic.StripHeaders...)...),
		owned:   newHeaderSet(ic.ForwardUserHeader, ic.ForwardTierHeader, ic.ForwardKindHeader),
		user:    canon(ic.ForwardUserHeader),
		tier:    canon(ic.ForwardTierHeader),
		kind:    canon(ic.ForwardKindHeader),
	}
	if ic.HideCredentials {
		h.owned[cgiName("Authorization")] = true
		h.owned[cgiName("X-Api-Key")] = true
	}
	return h
}

// stripUntrusted returns r without the strip headers when its peer is
// not a trusted proxy (a shallow copy with its own Header when there was
// something to remove).
func (ih *identityHeaders) stripUntrusted(r *http.Request) *http.Request {
	if len(ih.strip) == 0 || !ih.strip.has(r.Header) || peerTrusted(r.RemoteAddr, ih.trusted) {
		return r
	}
	r2 := *r
	r2.Header = r.Header.Clone()
	ih.strip.remove(r2.Header)
	return &r2
}

// forward sets the identity headers of a proxied request (pr.Out's
// headers are its own copy).
func (ih *identityHeaders) forward(pr *httputil.ProxyRequest) { ih.set(pr.Out.Header, pr.In.Context()) }

// set removes the identity headers from h and sets those of the identity
// in ctx: a proxied request's, or a decision's answer (decision.go).
func (ih *identityHeaders) set(h http.Header, ctx context.Context) {
	ih.owned.remove(h)
	id, ok := identityFrom(ctx)
	if !ok {
		return
	}
	// The values share one array (one allocation for up to three
	// headers); each header's slice is capped, so an append to one
	// cannot write into the next.
	var vals []string
	set := func(name, v string) {
		if vals == nil {
			vals = make([]string, 0, 3)
		}
		vals = append(vals, v)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	kind := "ip"
	if id.Authenticated {
		kind = id.Method
		if ih.user != "" && httpguts.ValidHeaderFieldValue(id.User) {
			set(ih.user, id.User)
		}
	}
	if ih.tier != "" && id.Tier != "" && httpguts.ValidHeaderFieldValue(id.Tier) {
		set(ih.tier, id.Tier)
	}
	if ih.kind != "" && kind != "" {
		set(ih.kind, kind)
	}
}
