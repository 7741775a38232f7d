package storeurl

import (
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"net/url"
	"strings"
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
	head, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, 0, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", 0, fmt.Errorf("URL %s: query: %v", redact.URL(raw), redact.Error(raw, err))
	}
	if !q.Has(ParamTimeout) {
		return raw, 0, nil
	}
	if len(q[ParamTimeout]) > 1 {
		return "", 0, fmt.Errorf("URL %s: %s may be given once", redact.URL(raw), ParamTimeout)
	}
	v := q.Get(ParamTimeout)
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Millisecond || d > time.Minute {
		return "", 0, fmt.Errorf("URL %s: %s=%q: want a duration from 1ms to 1m", redact.URL(raw), ParamTimeout, v)
	}
	q.Del(ParamTimeout)
	out := head
	if e := q.Encode(); e != "" {
		out += "?" + e
	}
	return out, d, nil
}
