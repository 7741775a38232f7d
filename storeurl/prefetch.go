package storeurl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/redisstore"
)

// Prefetch-mode query parameters of a Redis store URL (redisstore.Prefetch),
// taken out of the URL before it is opened.
const (
	// ParamPrefetch turns prefetch mode on for hot keys: "on" (the default
	// slice lifetime, 100 ms), "off", or the slice lifetime as a Go
	// duration ("250ms"). Rules under gcra, token_bucket and fixed_window
	// are prefetched; the others stay exact. "lease" is its deprecated
	// spelling: accepted, with a warning (Warnings).
	ParamPrefetch = "prefetch"
	// ParamPrefetchInstances is the number of instances the over-admission
	// bound is divided among (redisstore.PrefetchOptions.Instances): with n
	// instances or fewer, a prefetched key is over-admitted by at most 1% of
	// its capacity. Default 10. "lease_instances" is its deprecated
	// spelling.
	ParamPrefetchInstances = "prefetch_instances"
)

// oldParams are the deprecated spellings of the prefetch parameters (from
// when prefetch mode was called leased mode; a lease is now only the
// in-flight slot), each with its new name.
var oldParams = [...][2]string{{"lease", ParamPrefetch}, {"lease_instances", ParamPrefetchInstances}}

// Warnings returns what the store URL raw says that still works but
// should be written otherwise (the deprecated lease and lease_instances
// parameters), one message each; nil when there is nothing, or when raw
// does not parse (Open says why). Open logs them once; a gateway config's
// store is checked with it (sluice check prints them).
func Warnings(raw string) []string {
	_, query, ok := strings.Cut(raw, "?")
	if !ok {
		return nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range oldParams {
		if q.Has(p[0]) {
			out = append(out, fmt.Sprintf("URL parameter %s is deprecated (a lease is now only the in-flight slot): write %s=%s, which means the same", p[0], p[1], q.Get(p[0])))
		}
	}
	return out
}

// takePrefetch takes the prefetch parameters (and their deprecated
// spellings) out of raw's query and returns the URL without them and the
// prefetch options, or nil when prefetch mode is off.
func takePrefetch(raw string) (string, *redisstore.PrefetchOptions, error) {
	q, out, found, err := cutParams(raw, ParamPrefetch, ParamPrefetchInstances, oldParams[0][0], oldParams[1][0])
	if err != nil || !found {
		return out, nil, err
	}
	bad := func(msg string, args ...any) (string, *redisstore.PrefetchOptions, error) {
		return "", nil, fmt.Errorf("URL %s: %s", redact.URL(raw), fmt.Sprintf(msg, args...))
	}
	for _, p := range oldParams {
		if q.Has(p[0]) && q.Has(p[1]) {
			return bad("%s is the deprecated spelling of %s: give %s only", p[0], p[1], p[1])
		}
	}
	get := func(p [2]string) string { return q.Get(p[0]) + q.Get(p[1]) } // one of them, at most
	v, n := get(oldParams[0]), get(oldParams[1])
	o := &redisstore.PrefetchOptions{ExactOthers: true}
	switch v {
	case "on", "true", "1":
	case "off", "false", "0":
		o = nil
	case "":
		return bad("%s=%s without %s=on", ParamPrefetchInstances, n, ParamPrefetch)
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond || d > time.Minute {
			return bad("%s=%q: want on, off or a slice lifetime from 1ms to 1m", ParamPrefetch, v)
		}
		o.TTL = d
	}
	if n != "" {
		i, err := strconv.Atoi(n)
		if err != nil || i < 1 || i > 1<<20 {
			return bad("%s=%q: want a number of instances from 1 to %d", ParamPrefetchInstances, n, 1<<20)
		}
		if o != nil {
			o.Instances = i
		}
	}
	return out, o, nil
}
