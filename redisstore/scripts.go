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
	file   string
	tag    string // key namespace: prefix + tag + "{" + key + "}"
	fields int    // ARGV fields per request
}{
	shapeBucket: {"gcra.lua", "b", 7},
	shapeWindow: {"window.lua", "w", 6},
	shapeLog:    {"log.lua", "l", 5},
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

// appendArgs appends req's ARGV fields: now (or "" "" for the server's
// clock) and the step's parameters. req is valid, its rate positive and its
// cost within capacity (or zero).
func appendArgs(args []string, sh shape, req ratelimit.Request, now time.Time, useNow bool) []string {
	if useNow {
		args = append(args, strconv.FormatInt(now.Unix(), 10), strconv.Itoa(now.Nanosecond()))
	} else {
		args = append(args, "", "")
	}
	lim := req.Limit.Normalize()
	n := strconv.FormatInt(req.N, 10)
	switch sh {
	case shapeBucket:
		t := int64(lim.Interval())
		leaky, maxDelay := "0", "0"
		if req.Algorithm == ratelimit.LeakyBucket {
			leaky = "1"
			maxDelay = strconv.FormatInt(min(int64(req.MaxDelay), maxExact), 10)
		}
		return append(args, n, strconv.FormatInt(t, 10), strconv.FormatInt(lim.Burst*t, 10), leaky, maxDelay)
	case shapeWindow:
		sliding := "0"
		if req.Algorithm == ratelimit.SlidingWindowCounter {
			sliding = "1"
		}
		return append(args, n, strconv.FormatInt(lim.Rate, 10), strconv.FormatInt(int64(lim.Period), 10), sliding)
	}
	return append(args, n, strconv.FormatInt(lim.Rate, 10), strconv.FormatInt(int64(lim.Period), 10))
}

// replyWidth is the number of integers a script returns per request.
const replyWidth = 7

// decode turns one request's reply into a Decision.
// The durations come in two parts, r[2] + r[5]·unit and r[3] + r[6]·unit,
// where unit is a second for the bucket script and the window for the
// window script: a double cannot hold every duration up to 2·MaxPeriod,
// int64 can.
func decode(r []int64, lim ratelimit.Limit, sh shape) (ratelimit.Decision, error) {
	if len(r) != replyWidth || r[0] < 0 || r[0] > 1 {
		return ratelimit.Decision{}, fmt.Errorf("%w: malformed script reply %v", ErrScript, r)
	}
	w := int64(time.Second)
	if sh == shapeWindow {
		w = int64(lim.Period)
	}
	return ratelimit.Decision{
		Allowed:    r[0] == 1,
		Limit:      lim,
		Remaining:  r[1],
		RetryAfter: time.Duration(r[2] + r[5]*w),
		ResetAfter: time.Duration(r[3] + r[6]*w),
		Delay:      time.Duration(r[4]),
	}, nil
}
