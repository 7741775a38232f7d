package redislink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Classify wraps err, from the client, in script when Redis reported a
// script's error or a type it cannot take (a bug or an incompatible
// server, not an outage), else in unavailable (unreachable, no reply
// within timeout, a node gone, …), with detail (" (batch of 3)", say)
// after the outage's message.
func Classify(err error, timeout time.Duration, unavailable, script error, detail string) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		if strings.Contains(msg, "script") || strings.Contains(msg, "Lua") || strings.HasPrefix(msg, "WRONGTYPE") {
			return fmt.Errorf("%w: redis replied %q", script, msg)
		}
		return fmt.Errorf("%w: redis replied %q%s", unavailable, msg, detail)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no reply within %v%s", unavailable, timeout, detail)
	}
	return fmt.Errorf("%w: %v%s", unavailable, err, detail)
}
