package storeurl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/redisstore"
)

// ParamLayout and ParamPackedBuckets are the Redis store URL parameters
// of the state layout: redis://host:6379?layout=packed keeps the buckets'
// and the windows' states (all but sliding_window_log) as fields of shared
// hashes (redisstore.Options.Layout), in a fifth to a third of the memory;
// packed_buckets=N sets the hashes per hash slot (redisstore.Options.
// PackedBuckets, a power of two up to 64; default 2, for up to about three
// million limiters). They override the caller's Options.Redis.
const (
	ParamLayout        = "layout"
	ParamPackedBuckets = "packed_buckets"
)

// cutParams parses raw's query for the parameters names, each at most
// once: it returns their values (q), raw without them (and without a
// path of "/" alone then left, which names no database), and whether any
// was given.
func cutParams(raw string, names ...string) (q url.Values, rest string, found bool, err error) {
	head, query, ok := strings.Cut(raw, "?")
	if !ok {
		return nil, raw, false, nil
	}
	if q, err = url.ParseQuery(query); err != nil {
		return nil, "", false, fmt.Errorf("URL %s: query: %v", redact.URL(raw), redact.Error(raw, err))
	}
	for _, p := range names {
		if len(q[p]) > 1 {
			return nil, "", false, fmt.Errorf("URL %s: %s may be given once", redact.URL(raw), p)
		}
		found = found || q.Has(p)
	}
	if !found {
		return q, raw, false, nil
	}
	left := url.Values{}
	for k, v := range q {
		left[k] = v
	}
	for _, p := range names {
		left.Del(p)
	}
	rest = head
	if e := left.Encode(); e != "" {
		rest += "?" + e
	} else if u, err := url.Parse(head); err == nil && u.Path == "/" {
		// redis://host/?layout=packed: no database named, as redis://host.
		rest = strings.TrimSuffix(head, "/")
	}
	return q, rest, true, nil
}

// takeLayout removes the layout parameters from raw and applies them to
// ro.
func takeLayout(raw string, ro *redisstore.Options) (string, error) {
	q, rest, found, err := cutParams(raw, ParamLayout, ParamPackedBuckets)
	if err != nil || !found {
		return rest, err
	}
	if q.Has(ParamLayout) {
		l, err := redisstore.ParseLayout(q.Get(ParamLayout))
		if err != nil {
			return "", fmt.Errorf("URL %s: %s=%q: want string or packed", redact.URL(raw), ParamLayout, q.Get(ParamLayout))
		}
		ro.Layout = l
	}
	if q.Has(ParamPackedBuckets) {
		v := q.Get(ParamPackedBuckets)
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > redisstore.MaxPackedBuckets || n&(n-1) != 0 {
			return "", fmt.Errorf("URL %s: %s=%q: want a power of two from 1 to %d", redact.URL(raw), ParamPackedBuckets, v, redisstore.MaxPackedBuckets)
		}
		if ro.Layout != redisstore.LayoutPacked {
			return "", fmt.Errorf("URL %s: %s without %s=packed", redact.URL(raw), ParamPackedBuckets, ParamLayout)
		}
		ro.PackedBuckets = n
	}
	return rest, nil
}
