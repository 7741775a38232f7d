package identity

import (
	"errors"
	"fmt"
)

// Reason is why a presented credential was refused: one of a fixed set,
// so that servers can count refusals by reason (a metric label) and log
// them without the credential's text.
type Reason string

// The reasons of UnauthorizedError.
const (
	// ReasonMalformed is a credential that cannot be read: more than one
	// Authorization or X-API-Key header, a scheme other than Bearer, a JWT
	// that is not three base64url parts of JSON, a claim of the wrong type,
	// a token too long.
	ReasonMalformed Reason = "malformed"
	// ReasonUnknownKey is an API key the key file does not hold, or any
	// API key where none are accepted.
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonBadSignature is a JWT whose signature does not verify.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonWrongAlgorithm is a JWT signed with another algorithm than the
	// configured one, or with critical header extensions.
	ReasonWrongAlgorithm Reason = "wrong_algorithm"
	// ReasonExpired is a JWT past its exp (with the leeway).
	ReasonExpired Reason = "expired"
	// ReasonNotYetValid is a JWT before its nbf (with the leeway).
	ReasonNotYetValid Reason = "not_yet_valid"
	// ReasonWrongIssuer and ReasonWrongAudience are a JWT's iss and aud
	// other than the configured ones.
	ReasonWrongIssuer   Reason = "wrong_issuer"
	ReasonWrongAudience Reason = "wrong_audience"
	// ReasonMissingClaim is a JWT without exp or without the claim naming
	// the user.
	ReasonMissingClaim Reason = "missing_claim"
	// ReasonConflict is several credentials naming different users.
	ReasonConflict Reason = "conflict"
	// ReasonUnknownKeyID is a JWT whose kid names no key of the JWKS
	// (after the refresh it may ask for), or without kid when the JWKS
	// has several keys.
	ReasonUnknownKeyID Reason = "unknown_kid"
	// ReasonKeysUnavailable is a JWT checked while the JWKS holds no keys
	// (it could not be fetched, or held none usable): refused, not let
	// through.
	ReasonKeysUnavailable Reason = "keys_unavailable"
)

// Reasons lists every Reason, for servers that create their metric's
// series up front.
var Reasons = []Reason{ReasonMalformed, ReasonUnknownKey, ReasonBadSignature, ReasonWrongAlgorithm, ReasonExpired,
	ReasonNotYetValid, ReasonWrongIssuer, ReasonWrongAudience, ReasonMissingClaim, ReasonConflict, ReasonUnknownKeyID, ReasonKeysUnavailable}

// UnauthorizedError is a presented credential that is refused. It wraps
// ErrUnauthorized; its message never holds the credential.
type UnauthorizedError struct {
	Reason Reason
	msg    string
}

func (e *UnauthorizedError) Error() string { return e.msg + ": " + ErrUnauthorized.Error() }

func (e *UnauthorizedError) Unwrap() error { return ErrUnauthorized }

func refuse(reason Reason, format string, args ...any) error {
	return &UnauthorizedError{Reason: reason, msg: fmt.Sprintf(format, args...)}
}

// ReasonOf returns why err refused a credential: its UnauthorizedError's
// Reason, ReasonMalformed for another error wrapping ErrUnauthorized, and
// "" for an error that is not about a credential.
func ReasonOf(err error) Reason {
	var ue *UnauthorizedError
	switch {
	case errors.As(err, &ue):
		return ue.Reason
	case errors.Is(err, ErrUnauthorized):
		return ReasonMalformed
	}
	return ""
}
