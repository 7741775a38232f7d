package identity

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"
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
	cfg JWTConfig
}

func newJWTVerifier(cfg JWTConfig) (*jwtVerifier, error) {
	if err := checkKey(cfg.Algorithm, cfg.Key); err != nil {
		return nil, err
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
	return &jwtVerifier{cfg: cfg}, nil
}

type jwtClaims struct{ user, tier string }

func unauthorized(reason Reason, format string, args ...any) error {
	return refuse(reason, "identity: jwt: "+format, args...)
}

// verify checks tok's signature and claims.
func (v *jwtVerifier) verify(tok string) (jwtClaims, error) {
	if len(tok) > maxTokenLen {
		return jwtClaims{}, unauthorized(ReasonMalformed, "token longer than %d bytes", maxTokenLen)
	}
	h64, rest, ok1 := strings.Cut(tok, ".")
	p64, s64, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s64, ".") {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed token: want three dot-separated parts")
	}
	enc := base64.RawURLEncoding.Strict()
	hdrJSON, err := enc.DecodeString(h64)
	if err != nil {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed header encoding")
	}
	var hdr struct {
		Alg  string          `json:"alg"`
		Crit json.RawMessage `json:"crit"`
	}
	if err := json.Unmarshal(hdrJSON, &hdr); err != nil {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed header")
	}
	if hdr.Alg != v.cfg.Algorithm {
		return jwtClaims{}, unauthorized(ReasonWrongAlgorithm, "algorithm %q not accepted (want %s)", truncate(hdr.Alg), v.cfg.Algorithm)
	}
	if hdr.Crit != nil {
		return jwtClaims{}, unauthorized(ReasonWrongAlgorithm, "critical header extensions are not supported")
	}
	sig, err := enc.DecodeString(s64)
	if err != nil {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed signature encoding")
	}
	if !v.signatureOK(tok[:len(h64)+1+len(p64)], sig) {
		return jwtClaims{}, unauthorized(ReasonBadSignature, "bad signature")
	}
	payload, err := enc.DecodeString(p64)
	if err != nil {
		return jwtClaims{}, unauthorized(ReasonMalformed, "malformed claims encoding")
	}
	return v.claims(payload)
}

func (v *jwtVerifier) signatureOK(signed string, sig []byte) bool {
	switch key := v.cfg.Key.(type) {
	case []byte:
		m := hmac.New(sha256.New, key)
		m.Write([]byte(signed))
		return hmac.Equal(m.Sum(nil), sig)
	case *rsa.PublicKey:
		d := sha256.Sum256([]byte(signed))
		return rsa.VerifyPKCS1v15(key, crypto.SHA256, d[:], sig) == nil
	case *ecdsa.PublicKey:
		if len(sig) != 64 {
			return false
		}
		d := sha256.Sum256([]byte(signed))
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(key, d[:], r, s)
	}
	return false
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
