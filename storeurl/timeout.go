package storeurl

import (
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"time"
)

// ParamTimeout is the Redis store URL parameter that bounds each call:
// redis://host:6379?timeout=250ms (redisstore.Options.Timeout; default
// redisstore.DefaultTimeout). A caller's own Options.Redis.Timeout (sluice
// rls's --store-timeout) is overridden by it.
const ParamTimeout = "timeout"

// takeTimeout removes the timeout parameter from raw and returns it, zero
// when absent.
func takeTimeout(raw string) (string, time.Duration, error) {
	q, rest, found, err := cutParams(raw, ParamTimeout)
	if err != nil || !found {
		return rest, 0, err
	}
	v := q.Get(ParamTimeout)
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Millisecond || d > time.Minute {
		return "", 0, fmt.Errorf("URL %s: %s=%q: want a duration from 1ms to 1m", redact.URL(raw), ParamTimeout, v)
	}
	return rest, d, nil
}
