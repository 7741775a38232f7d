package gateway

import (
	"errors"

	"github.com/sluicehq/sluice/rules"
)

func asRulesErrors(err error, target **rules.Errors) bool { return errors.As(err, target) }
