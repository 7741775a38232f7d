package gateway

import (
	"errors"

	"github.com/sluicehq/sluice/identity"
)

func jwtConfig(j *JWTConfig) (*identity.JWTConfig, error) {
	return nil, errors.New("jwt not available in this build")
}
