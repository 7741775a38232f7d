package storeurl

import (
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/redisstore"
)

// Leased-mode query parameters of a Redis store URL (redisstore.Leased),
// taken out of the URL before it is opened.
const (
	// ParamLease turns leased mode on for hot keys: "on" (the default
	// slice lifetime, 100 ms), "off", or the slice lifetime as a Go
	// duration ("250ms"). Rules under gcra, token_bucket and fixed_window
	// are leased; the others stay exact.
	ParamLease = "lease"
	// ParamLeaseInstances is the number of instances the over-admission
	// bound is divided among (redisstore.LeaseOptions.Instances): with n
	// instances or fewer, a leased key is over-admitted by at most 1% of
	// its capacity. Default 10.
	ParamLeaseInstances = "lease_instances"
)

// takeLease takes the lease parameters out of raw's query and returns the
// URL without them and the lease options, or nil when leased mode is off.
func takeLease(raw string) (string, *redisstore.LeaseOptions, error) {
	head, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, nil, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, fmt.Errorf("URL %s: query: %v", redact.URL(raw), redact.Error(raw, err))
	}
	if !q.Has(ParamLease) && !q.Has(ParamLeaseInstances) {
		return raw, nil, nil
	}
	bad := func(msg string, args ...any) (string, *redisstore.LeaseOptions, error) {
		return "", nil, fmt.Errorf("URL %s: %s", redact.URL(raw), fmt.Sprintf(msg, args...))
	}
	if len(q[ParamLease]) > 1 || len(q[ParamLeaseInstances]) > 1 {
		return bad("%s and %s may be given once", ParamLease, ParamLeaseInstances)
	}
	v, n := q.Get(ParamLease), q.Get(ParamLeaseInstances)
	q.Del(ParamLease)
	q.Del(ParamLeaseInstances)
	out := head
	if e := q.Encode(); e != "" {
		out += "?" + e
	}
	o := &redisstore.LeaseOptions{ExactOthers: true}
	switch v {
	case "on", "true", "1":
	case "off", "false", "0":
		o = nil
	case "":
		return bad("%s=%s without %s=on", ParamLeaseInstances, n, ParamLease)
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond || d > time.Minute {
			return bad("%s=%q: want on, off or a slice lifetime from 1ms to 1m", ParamLease, v)
		}
		o.TTL = d
	}
	if n != "" {
		i, err := strconv.Atoi(n)
		if err != nil || i < 1 || i > 1<<20 {
			return bad("%s=%q: want a number of instances from 1 to %d", ParamLeaseInstances, n, 1<<20)
		}
		if o != nil {
			o.Instances = i
		}
	}
	return out, o, nil
}
