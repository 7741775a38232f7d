package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// JWT algorithms.
const (
	HS256 = "HS256"
	RS256 = "RS256"
	ES256 = "ES256"
)

// maxTokenLen bounds the JWTs Resolve parses.
const maxTokenLen = 16 << 10

// JWTConfig configures JWT bearer tokens.
//
// The algorithm is fixed here: a token whose header names another one
// (including "none", or HS256 against an RSA key) is refused, so tokens
// cannot choose how they are checked.
type JWTConfig struct {
	// Algorithm is HS256, RS256 or ES256.
	Algorithm string
	// Key verifies signatures: the shared secret ([]byte, at least 32
	// bytes) for HS256, an *rsa.PublicKey (2048 bits or more) for RS256, an
	// *ecdsa.PublicKey on P-256 for ES256. LoadJWTKey reads one from a file.
	Key any
	// JWKS, instead of Key, holds the keys (RS256 or ES256): a token's
	// kid picks one (see JWKS).
	JWKS *JWKS
	// UserClaim names the claim holding the user ID; "" means "sub".
	UserClaim string
	// TierClaim names a claim holding the tier; "" means none.
	TierClaim string
	// Issuer, when not "", must equal the iss claim.
	Issuer string
	// Audience, when not "", must be (or be in) the aud claim.
	Audience string
	// Leeway is the clock skew allowed when checking exp and nbf; 0 means
	// none.
	Leeway time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// LoadJWTKey reads the key for alg from path: the secret itself for HS256
// (the file's bytes, a trailing newline removed), a PEM public key
// ("PUBLIC KEY", "RSA PUBLIC KEY") or certificate for RS256 and ES256.
func LoadJWTKey(alg, path string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return ParseJWTKey(alg, data)
}

// ParseJWTKey parses key material for alg, as LoadJWTKey does.
func ParseJWTKey(alg string, data []byte) (any, error) {
	switch alg {
	case HS256:
		secret := bytes.TrimRight(data, "\r\n")
		if len(secret) < sha256.Size {
			return nil, fmt.Errorf("identity: HS256 secret is %d bytes, want at least %d", len(secret), sha256.Size)
		}
		return secret, nil
	case RS256, ES256:
		block, _ := pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("identity: %s key: no PEM block", alg)
		}
		var pub any
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = cert.PublicKey
			}
		default:
			return nil, fmt.Errorf("identity: %s key: PEM block %q, want PUBLIC KEY (a private key does not belong here)", alg, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("identity: %s key: %w", alg, err)
		}
		if err := checkKey(alg, pub); err != nil {
			return nil, err
		}
		return pub, nil
	}
	return nil, fmt.Errorf("identity: unknown JWT algorithm %q (want HS256, RS256 or ES256)", alg)
}

func checkKey(alg string, key any) error {
	switch alg {
	case HS256:
		k, ok := key.([]byte)
		if !ok {
			return fmt.Errorf("identity: HS256 needs a []byte secret, got %T", key)
		}
		if len(k) < sha256.Size {
			return fmt.Errorf("identity: HS256 secret is %d bytes, want at least %d", len(k), sha256.Size)
		}
	case RS256:
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("identity: RS256 needs an RSA public key, got %T", key)
		}
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("identity: RS256 key is %d bits, want at least 2048", k.N.BitLen())
		}
	case ES256:
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("identity: ES256 needs an ECDSA public key, got %T", key)
		}
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("identity: ES256 needs a P-256 key, got %s", k.Curve.Params().Name)
		}
	default:
		return fmt.Errorf("identity: unknown JWT algorithm %q (want HS256, RS256 or ES256)", alg)
	}
	return nil
}

type jwtVerifier struct {
	cfg  JWTConfig
	algs []jose.SignatureAlgorithm // the one accepted
	key  []any                     // cfg.Key, when there is no JWKS
}

func newJWTVerifier(cfg JWTConfig) (*jwtVerifier, error) {
	switch {
	case cfg.JWKS != nil && cfg.Key != nil:
		return nil, errors.New("identity: JWT: a key or a JWKS, not both")
	case cfg.JWKS != nil && cfg.JWKS.opts.Algorithm != cfg.Algorithm:
		return nil, fmt.Errorf("identity: JWT: the JWKS is for %s, the tokens %s", cfg.JWKS.opts.Algorithm, cfg.Algorithm)
	case cfg.JWKS == nil:
		if err := checkKey(cfg.Algorithm, cfg.Key); err != nil {
			return nil, err
		}
	}
	if cfg.Leeway < 0 {
		return nil, fmt.Errorf("identity: negative JWT leeway %v", cfg.Leeway)
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "sub"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if k, ok := cfg.Key.([]byte); ok {
		cfg.Key = bytes.Clone(k)
	}
	return &jwtVerifier{cfg: cfg, algs: []jose.SignatureAlgorithm{jose.SignatureAlgorithm(cfg.Algorithm)}, key: []any{cfg.Key}}, nil
}

type jwtClaims struct{ user, tier string }

func unauthorized(reason Reason, format string, args ...any) error {
	return refuse(reason, "identity: jwt: "+format, args...)
}

// verify checks tok's signature and claims. The JWS is go-jose's: its
// parser refuses any algorithm but the configured one (so "none", or
// HS256 against an RSA key, never reaches a key), its Verify checks the
// signature; the claims are checked here.
func (v *jwtVerifier) verify(tok string) (jwtClaims, error) {
	if len(tok) > maxTokenLen {
		return jwtClaims{}, unauthorized(ReasonMalformed, "token longer than %d bytes", maxTokenLen)
	}
	if strings.Count(tok, ".") != 2 {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed token: want three dot-separated parts")
	}
	jws, err := jose.ParseSignedCompact(tok, v.algs)
	if err != nil {
		var ea *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &ea) {
			return jwtClaims{}, unauthorized(ReasonWrongAlgorithm, "algorithm %q not accepted (want %s)", truncate(string(ea.Got)), v.cfg.Algorithm)
		}
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed token")
	}
	h := jws.Signatures[0].Protected
	if _, ok := h.ExtraHeaders["crit"]; ok {
		return jwtClaims{}, unauthorized(ReasonWrongAlgorithm, "critical header extensions are not supported")
	}
	keys, err := v.keys(h.KeyID)
	if err != nil {
		return jwtClaims{}, err
	}
	for _, k := range keys {
		if payload, err := jws.Verify(k); err == nil {
			return v.claims(payload)
		}
	}
	return jwtClaims{}, unauthorized(ReasonBadSignature, "bad signature")
}

// keys returns the keys that may have signed a token with key ID kid:
// the configured key (whatever kid says), or the JWKS's keys of that ID.
func (v *jwtVerifier) keys(kid string) ([]any, error) {
	if v.cfg.JWKS == nil {
		return v.key, nil
	}
	return v.cfg.JWKS.lookup(kid)
}

func (v *jwtVerifier) claims(payload []byte) (jwtClaims, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var c map[string]any
	if err := dec.Decode(&c); err != nil || c == nil {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed claims")
	}
	now := v.cfg.Now()
	exp, ok, err := numericDate(c, "exp")
	switch {
	case err != nil:
		return jwtClaims{}, err
	case !ok:
		return jwtClaims{}, unauthorized(ReasonMissingClaim, "token has no exp")
	case !now.Before(exp.Add(v.cfg.Leeway)):
		return jwtClaims{}, unauthorized(ReasonExpired, "token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	nbf, ok, err := numericDate(c, "nbf")
	switch {
	case err != nil:
		return jwtClaims{}, err
	case ok && now.Add(v.cfg.Leeway).Before(nbf):
		return jwtClaims{}, unauthorized(ReasonNotYetValid, "token not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	if v.cfg.Issuer != "" {
		if iss, _ := c["iss"].(string); iss != v.cfg.Issuer {
			return jwtClaims{}, unauthorized(ReasonWrongIssuer, "wrong issuer")
		}
	}
	if v.cfg.Audience != "" && !hasAudience(c["aud"], v.cfg.Audience) {
		return jwtClaims{}, unauthorized(ReasonWrongAudience, "wrong audience")
	}
	user, ok := claimString(c[v.cfg.UserClaim])
	if !ok || user == "" {
		return jwtClaims{}, unauthorized(ReasonMissingClaim, "no %q claim naming the user", v.cfg.UserClaim)
	}
	out := jwtClaims{user: user}
	if v.cfg.TierClaim != "" {
		out.tier, _ = claimString(c[v.cfg.TierClaim])
	}
	return out, nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, possibly
// fractional).
func numericDate(c map[string]any, name string) (time.Time, bool, error) {
	raw, present := c[name]
	if !present {
		return time.Time{}, false, nil
	}
	n, ok := raw.(json.Number)
	if !ok {
		return time.Time{}, false, unauthorized(ReasonMalformed, "%s is not a number", name)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < -1e11 || f > 1e11 {
		return time.Time{}, false, unauthorized(ReasonMalformed, "%s is out of range", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

func hasAudience(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// claimString reads a string claim; a number is taken as its text (user
// IDs are often numeric).
func claimString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case json.Number:
		return string(s), true
	}
	return "", false
}

func truncate(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}
