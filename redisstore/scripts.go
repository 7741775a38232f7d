package redisstore

import (
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

//go:embed lua/*.lua
var luaFS embed.FS

// shape is the form of a key's state, and the script that steps it. The
// algorithms that share a Go step share a shape, so (as in memstore) GCRA,
// TokenBucket and LeakyBucket on the same key share one TAT, and
// FixedWindow and SlidingWindowCounter share one pair of counters.
type shape uint8

const (
	shapeBucket shape = iota // internal/gcra: a TAT
	shapeWindow              // internal/window: start, prev, curr
	shapeLog                 // internal/slidinglog: a list of entries
	numShapes
)

var shapeInfo = [numShapes]struct {
	file string
	tag  string // key namespace: prefix + tag + "{" + key + "}"
}{
	shapeBucket: {"gcra.lua", "b"},
	shapeWindow: {"window.lua", "w"},
	shapeLog:    {"log.lua", "l"},
}

func shapeOf(a ratelimit.Algorithm) shape {
	switch a {
	case ratelimit.FixedWindow, ratelimit.SlidingWindowCounter:
		return shapeWindow
	case ratelimit.SlidingWindowLog:
		return shapeLog
	}
	return shapeBucket
}

// Script returns the Lua source of the script that runs algorithm a, for
// review and for tools that load it themselves. Every script takes a batch
// of requests; the comment at the top of each step says how.
func Script(a ratelimit.Algorithm) string { return scriptSources[shapeOf(a)] }

var scriptSources = func() (out [numShapes]string) {
	pre, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	for i, info := range shapeInfo {
		step, err := luaFS.ReadFile("lua/" + info.file)
		if err != nil {
			panic(err)
		}
		out[i] = string(pre) + "\n" + string(step)
	}
	return out
}()

func newScripts() (out [numShapes]*rueidis.Lua) {
	for i, src := range scriptSources {
		out[i] = rueidis.NewLuaScript(src)
	}
	return out
}

// maxExact bounds the durations passed to the scripts: they compute in
// doubles, exact below 2^53.
const maxExact = int64(ratelimit.MaxPeriod)

// spec is the part of a request that many requests of a batch share: the
// script's parameters for one limit. A batch sends each distinct spec once.
type spec struct {
	a, b int64 // bucket: interval, Burst·interval; windows: rate, period
	flag bool  // bucket: leaky; window: sliding
	c    int64 // bucket: max delay
}

func specOf(sh shape, req ratelimit.Request) spec {
	lim := req.Limit.Normalize()
	switch sh {
	case shapeBucket:
		t := int64(lim.Interval())
		sp := spec{a: t, b: lim.Burst * t}
		if req.Algorithm == ratelimit.LeakyBucket {
			sp.flag, sp.c = true, min(int64(req.MaxDelay), maxExact)
		}
		return sp
	case shapeWindow:
		return spec{a: lim.Rate, b: int64(lim.Period), flag: req.Algorithm == ratelimit.SlidingWindowCounter}
	}
	return spec{a: lim.Rate, b: int64(lim.Period)}
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// appendSpec appends sp's fields as the shape's script reads them.
func appendSpec(args []string, sh shape, sp spec) []string {
	a, b := strconv.FormatInt(sp.a, 10), strconv.FormatInt(sp.b, 10)
	switch sh {
	case shapeBucket:
		return append(args, a, b, bit(sp.flag), strconv.FormatInt(sp.c, 10))
	case shapeWindow:
		return append(args, a, b, bit(sp.flag))
	}
	return append(args, a, b)
}

// decodeNext reads the next decision from a script's reply and returns it
// with the rest of the reply. The durations come in two parts, d + x·unit,
// where unit is the period for the window script with a period of at most
// MaxPeriod, and a second otherwise: a double cannot hold every duration up
// to 2·MaxWindow, an int64 can.
func decodeNext(r []int64, lim ratelimit.Limit, sh shape) (ratelimit.Decision, []int64, error) {
	if len(r) < 4 || r[0] < 0 || r[0] > 3 || (r[0]&2 != 0 && len(r) < 7) {
		return ratelimit.Decision{}, nil, fmt.Errorf("%w: malformed script reply %v", ErrScript, r[:min(len(r), 7)])
	}
	d := ratelimit.Decision{
		Allowed:    r[0]&1 == 1,
		Limit:      lim,
		Remaining:  r[1],
		RetryAfter: time.Duration(r[2]),
		ResetAfter: time.Duration(r[3]),
	}
	if r[0]&2 == 0 {
		return d, r[4:], nil
	}
	unit := int64(time.Second)
	if sh == shapeWindow && lim.Period <= ratelimit.MaxPeriod {
		unit = int64(lim.Period)
	}
	d.Delay = time.Duration(r[4])
	d.RetryAfter += time.Duration(r[5] * unit)
	d.ResetAfter += time.Duration(r[6] * unit)
	return d, r[7:], nil
}
