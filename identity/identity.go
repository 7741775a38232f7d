package identity

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ErrUnauthorized is wrapped by every error about a credential that was
// presented and is not acceptable: unknown API key, bad signature, expired
// token, malformed header. Answer such requests 401.
var ErrUnauthorized = errors.New("identity: unauthorized")

// Identity is who is calling.
type Identity struct {
	// User is the user ID of an authenticated caller.
	User string
	// Tier is the caller's tier (plan), from the API key file or a JWT
	// claim; "" when unknown.
	Tier string
	// IP is the client's address (see ClientIP); it is set for
	// authenticated callers too.
	IP netip.Addr
	// Authenticated reports whether User was established by a credential.
	Authenticated bool
	// Method is how the caller was authenticated: "api_key", "jwt",
	// "header", or "" when anonymous.
	Method string
	// TrustedPeer reports whether the request came from a configured
	// trusted proxy (Options.TrustedProxies): only then are headers that
	// only a proxy may set (X-Forwarded-For, the user header, a cost
	// header) believed.
	TrustedPeer bool

	v6bits int // limit IPv6 clients per this prefix length; 0: whole address
}

// Key returns the limiting key: "user:<id>" when authenticated, else
// "ip:<addr>", or "ip:<prefix>" ("ip:2001:db8:1:2::/64") for an IPv6
// client when the Resolver limits IPv6 per prefix. An invalid IP gives
// "ip:unknown".
func (id Identity) Key() string {
	if id.Authenticated {
		return "user:" + id.User
	}
	if !id.IP.IsValid() {
		return "ip:unknown"
	}
	// Built in a stack buffer: one allocation, the string.
	var buf [64]byte
	b := append(buf[:0], "ip:"...)
	if id.v6bits > 0 && id.IP.Is6() {
		if p, err := id.IP.Prefix(id.v6bits); err == nil {
			return string(p.AppendTo(b))
		}
	}
	return string(id.IP.AppendTo(b))
}

// Options configure a Resolver. The zero value trusts no proxy, limits
// whole addresses and authenticates nobody (everyone is anonymous by IP).
type Options struct {
	// TrustedProxies are the proxies whose X-Forwarded-For / Forwarded
	// headers (and UserHeader) are believed. Empty: nothing is trusted.
	TrustedProxies []netip.Prefix
	// IPv6Prefix, when not 0, limits IPv6 clients per prefix of that many
	// bits (64 is usual: one customer's network). 0: per whole address.
	IPv6Prefix int
	// APIKeys are the accepted API keys; nil turns API keys off.
	APIKeys *KeyStore
	// JWT configures JWT bearer tokens; nil turns JWTs off.
	JWT *JWTConfig
	// UserHeader names a header carrying the user ID, set by a trusted
	// proxy that authenticated the caller. It is honoured only when the
	// connection's peer is in TrustedProxies; from anyone else it is
	// ignored. "": off.
	UserHeader string
	// TierHeader names a header carrying the tier, read with UserHeader.
	TierHeader string
}

// Resolver resolves requests to identities. It is safe for concurrent use.
type Resolver struct {
	opts Options
	jwt  *jwtVerifier
}

// NewResolver returns a Resolver for opts, or an error if opts are
// inconsistent (an IPv6Prefix outside 0–128, a JWT key unfit for its
// algorithm, a UserHeader with no trusted proxy).
func NewResolver(opts Options) (*Resolver, error) {
	if opts.IPv6Prefix < 0 || opts.IPv6Prefix > 128 {
		return nil, fmt.Errorf("identity: ipv6 prefix %d out of range 0-128", opts.IPv6Prefix)
	}
	for _, p := range opts.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("identity: invalid trusted proxy prefix %v", p)
		}
	}
	if opts.UserHeader != "" && len(opts.TrustedProxies) == 0 {
		return nil, errors.New("identity: user header needs trusted proxies (it is only honoured from them)")
	}
	if opts.TierHeader != "" && opts.UserHeader == "" {
		return nil, errors.New("identity: tier header needs a user header")
	}
	r := &Resolver{opts: opts}
	r.opts.TrustedProxies = append([]netip.Prefix(nil), opts.TrustedProxies...)
	for i, p := range r.opts.TrustedProxies {
		r.opts.TrustedProxies[i] = p.Masked()
	}
	if opts.JWT != nil {
		v, err := newJWTVerifier(*opts.JWT)
		if err != nil {
			return nil, err
		}
		r.jwt = v
	}
	return r, nil
}

// Resolve returns the identity of req's caller. A credential that is
// presented and not acceptable is an error wrapping ErrUnauthorized; no
// credential at all is an anonymous Identity keyed by client IP. When
// several credentials are presented (say X-API-Key and a JWT), each must be
// valid and they must name the same user.
func (r *Resolver) Resolve(req *http.Request) (Identity, error) {
	ip, peerTrusted := clientIP(req.RemoteAddr, req.Header, r.opts.TrustedProxies)
	id := Identity{IP: ip, v6bits: r.opts.IPv6Prefix, TrustedPeer: peerTrusted}

	var found []Identity
	if vals := req.Header.Values("Authorization"); len(vals) > 0 && (r.jwt != nil || r.opts.APIKeys != nil) {
		if len(vals) > 1 {
			return id, refuse(ReasonMalformed, "identity: more than one Authorization header")
		}
		tok, ok := bearer(vals[0])
		if !ok {
			return id, refuse(ReasonMalformed, "identity: Authorization is not a Bearer credential")
		}
		got, err := r.bearer(tok)
		if err != nil {
			return id, err
		}
		found = append(found, got)
	}
	// "X-Api-Key" is the canonical form of X-API-Key: looking it up
	// allocates nothing.
	if vals := req.Header.Values("X-Api-Key"); len(vals) > 0 && r.opts.APIKeys != nil {
		if len(vals) > 1 {
			return id, refuse(ReasonMalformed, "identity: more than one X-API-Key header")
		}
		got, err := r.apiKey(strings.TrimSpace(vals[0]))
		if err != nil {
			return id, err
		}
		found = append(found, got)
	}
	if len(found) == 0 && r.opts.UserHeader != "" && id.TrustedPeer {
		if u := strings.TrimSpace(req.Header.Get(r.opts.UserHeader)); u != "" {
			got := Identity{User: u, Method: "header", Authenticated: true}
			if r.opts.TierHeader != "" {
				got.Tier = strings.TrimSpace(req.Header.Get(r.opts.TierHeader))
			}
			found = append(found, got)
		}
	}
	for _, f := range found[min(1, len(found)):] {
		if f.User != found[0].User {
			return id, refuse(ReasonConflict, "identity: credentials name different users")
		}
	}
	if len(found) > 0 {
		id.User, id.Tier, id.Method, id.Authenticated = found[0].User, found[0].Tier, found[0].Method, true
	}
	return id, nil
}

// bearer returns the token of an "Authorization: Bearer <token>" value.
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// bearer authenticates a bearer token: a JWT when JWTs are on and it has
// a JWT's shape, else an API key.
func (r *Resolver) bearer(tok string) (Identity, error) {
	if r.jwt != nil && (r.opts.APIKeys == nil || strings.Count(tok, ".") == 2) {
		c, err := r.jwt.verify(tok)
		if err != nil {
			return Identity{}, err
		}
		return Identity{User: c.user, Tier: c.tier, Method: "jwt", Authenticated: true}, nil
	}
	return r.apiKey(tok)
}

func (r *Resolver) apiKey(key string) (Identity, error) {
	if r.opts.APIKeys == nil {
		return Identity{}, refuse(ReasonUnknownKey, "identity: API keys are not accepted")
	}
	k, ok := r.opts.APIKeys.Lookup(key)
	if !ok {
		return Identity{}, refuse(ReasonUnknownKey, "identity: unknown API key")
	}
	return Identity{User: k.User, Tier: k.Tier, Method: "api_key", Authenticated: true}, nil
}
