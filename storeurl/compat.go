package storeurl

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/redisstore"
)

// ParamCompatWindow is the Redis store URL parameter of the fixed
// window's compatibility window (redisstore.Options.CompatWindow): how
// long after it starts the store writes the marker form that versions
// before the one key read, so that a rolling upgrade from one of them
// is safe. redis://host:6379?compat_window=3h covers a longer rollout;
// compat_window=off writes the one key at once (a fleet with no instance
// of before). Default an hour. It overrides the caller's Options.Redis.
const ParamCompatWindow = "compat_window"

// maxCompatWindow bounds compat_window: a rollout longer than a week is
// a typo more likely than a plan.
const maxCompatWindow = 7 * 24 * time.Hour

// takeCompatWindow removes compat_window from raw and applies it to ro.
func takeCompatWindow(raw string, ro *redisstore.Options) (string, error) {
	q, rest, found, err := cutParams(raw, ParamCompatWindow)
	if err != nil || !found {
		return rest, err
	}
	v := q.Get(ParamCompatWindow)
	if v == "off" {
		ro.CompatWindow = -1
		return rest, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute || d > maxCompatWindow {
		return "", fmt.Errorf("URL %s: %s=%q: want off or a duration from 1m to %v", redact.URL(raw), ParamCompatWindow, v, maxCompatWindow)
	}
	ro.CompatWindow = d
	return rest, nil
}
