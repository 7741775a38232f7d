package gateway

import (
	"github.com/sluicehq/sluice/identity"
)

// jwtConfig turns the jwt section into the identity package's config,
// reading the key file.
func jwtConfig(cfg *Config, j *JWTConfig) (*identity.JWTConfig, error) {
	data, err := cfg.read(j.KeyFile)
	if err != nil {
		return nil, err
	}
	key, err := identity.ParseJWTKey(j.Algorithm, data)
	if err != nil {
		return nil, err
	}
	return &identity.JWTConfig{
		Algorithm: j.Algorithm, Key: key, UserClaim: j.UserClaim, TierClaim: j.TierClaim,
		Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway,
	}, nil
}
