package gateway

import (
	"log/slog"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/identity"
)

// jwtConfig turns the jwt section into the identity package's config:
// the key file read, or the JWKS of jwks_url (jwks returns it).
func jwtConfig(cfg *Config, j *JWTConfig, jwks func(*JWTConfig) (*identity.JWKS, error)) (*identity.JWTConfig, error) {
	out := &identity.JWTConfig{
		Algorithm: j.Algorithm, UserClaim: j.UserClaim, TierClaim: j.TierClaim,
		Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway,
	}
	if j.JWKSURL != "" {
		ks, err := jwks(j)
		if err != nil {
			return nil, err
		}
		out.JWKS = ks
		return out, nil
	}
	data, err := cfg.read(j.KeyFile)
	if err != nil {
		return nil, err
	}
	if out.Key, err = identity.ParseJWTKey(j.Algorithm, data); err != nil {
		return nil, err
	}
	return out, nil
}

// jwksOptions are the identity package's options for j's jwks_url.
func jwksOptions(j *JWTConfig, log *slog.Logger) identity.JWKSOptions {
	opts := identity.JWKSOptions{URL: j.JWKSURL, Algorithm: j.Algorithm, Refresh: j.JWKSRefresh, MinInterval: j.JWKSMinInterval}
	if log != nil {
		opts.OnError = func(err error) {
			log.Error("gateway: JWKS not fetched; the keys held keep serving (none: every JWT is refused)", "err", err)
		}
	}
	return opts
}

// newJWKS is the JWKS of a config that is not served (sluice check):
// it fetches nothing until a token asks.
func newJWKS(j *JWTConfig) (*identity.JWKS, error) { return identity.NewJWKS(jwksOptions(j, nil)) }

// jwksCache keeps a gateway's JWKS across reloads, so that a reload
// neither drops the keys held (and answers 401 while the IdP is down)
// nor fetches the set again: the same jwks_url, alg and intervals are the
// same JWKS.
type jwksCache struct {
	mu   sync.Mutex
	key  string
	jwks *identity.JWKS
	log  *slog.Logger
}

func (c *jwksCache) get(j *JWTConfig) (*identity.JWKS, error) {
	key := j.JWKSURL + " " + j.Algorithm + " " + j.JWKSRefresh.String() + " " + j.JWKSMinInterval.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jwks != nil && c.key == key {
		return c.jwks, nil
	}
	ks, err := identity.NewJWKS(jwksOptions(j, c.log))
	if err != nil {
		return nil, err
	}
	c.key, c.jwks = key, ks
	return ks, nil
}

// jwt decodes identity.jwt.
func (d *decoder) jwt(v *yaml.Node, rel func(string) string) *JWTConfig {
	j := &JWTConfig{UserClaim: "sub"}
	p := func(f string) string { return "identity.jwt." + f }
	var urlLine int
	d.fields(v, "identity.jwt", map[string]func(k, v *yaml.Node){
		"alg":        func(k, v *yaml.Node) { j.Algorithm = d.str(v, p("alg")) },
		"key_file":   func(k, v *yaml.Node) { j.KeyFile = rel(d.str(v, p("key_file"))) },
		"user_claim": func(k, v *yaml.Node) { j.UserClaim = d.str(v, p("user_claim")) },
		"tier_claim": func(k, v *yaml.Node) { j.TierClaim = d.str(v, p("tier_claim")) },
		"issuer":     func(k, v *yaml.Node) { j.Issuer = d.str(v, p("issuer")) },
		"audience":   func(k, v *yaml.Node) { j.Audience = d.str(v, p("audience")) },
		"leeway":     func(k, v *yaml.Node) { j.Leeway = d.duration(v, p("leeway")) },
		"jwks_url": func(k, v *yaml.Node) {
			j.JWKSURL, urlLine = d.str(v, p("jwks_url")), v.Line
			if err := identity.CheckJWKSURL(j.JWKSURL); err != nil {
				d.add(v.Line, p("jwks_url"), "%s", strings.TrimPrefix(err.Error(), "identity: "))
			}
		},
		"jwks_refresh":      func(k, v *yaml.Node) { j.JWKSRefresh = d.duration(v, p("jwks_refresh")) },
		"jwks_min_interval": func(k, v *yaml.Node) { j.JWKSMinInterval = d.duration(v, p("jwks_min_interval")) },
	})
	switch j.Algorithm {
	case "HS256", "RS256", "ES256":
	default:
		d.add(v.Line, p("alg"), "want HS256, RS256 or ES256, got %q", j.Algorithm)
	}
	switch {
	case j.KeyFile == "" && j.JWKSURL == "":
		d.add(v.Line, p("key_file"), "missing key_file (or jwks_url)")
	case j.KeyFile != "" && j.JWKSURL != "":
		d.add(urlLine, p("jwks_url"), "key_file or jwks_url, not both")
	case j.JWKSURL != "" && j.Algorithm == "HS256":
		d.add(urlLine, p("jwks_url"), "a JWKS holds public keys: alg RS256 or ES256, not HS256 (whose secret is key_file)")
	}
	return j
}
