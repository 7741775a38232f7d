package redisstore

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/algorithm/window"
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
	shapeBucket shape = iota // algorithm/gcra: a TAT
	shapeWindow              // algorithm/window: start, prev, curr
	shapeLog                 // algorithm/slidinglog: a list of entries
	numShapes
)

var shapeInfo = [numShapes]struct {
	files []string // the script's files, in order: its step last
	tag   string   // key namespace: prefix + tag + "{" + slot tag + "}" + hash (keys.go)
}{
	// "t": the TAT in binary (struct '<I4I4I4' with the emission interval
	// it was made under, or '<i8i4i8' past 32 bits; '<i8i4' before, still
	// read); "b" held it in decimal before, and a store must not read the
	// other form.
	shapeBucket: {[]string{"legacy.lua", "batch.lua", "gcra.lua"}, "t"},
	// "c": the counters in binary (struct '<I4…' in 28 bytes, or
	// '<i8i4i8i8i8i8i4' past 32 bits, with the period they were counted
	// in; '<i8i4i8i8i8' before, still read); "w" held them in decimal
	// before.
	shapeWindow: {[]string{"legacy.lua", "pairs.lua", "batch.lua", "window.lua"}, "c"},
	shapeLog:    {[]string{"legacy.lua", "pairs.lua", "prelude.lua", "log.lua"}, "l"},
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
	for i, info := range shapeInfo {
		parts := make([]string, len(info.files))
		for j, f := range info.files {
			parts[j] = luaFile(f)
		}
		out[i] = strings.Join(parts, "\n")
	}
	return out
}()

// luaFile returns lua/name.
func luaFile(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// undoSource is undo.lua: it takes back a fixed window's plain-command
// increment (fast.go).
var undoSource = luaFile("undo.lua")

func newScripts() (out [numShapes]*rueidis.Lua) {
	for i, src := range scriptSources {
		out[i] = rueidis.NewLuaScript(src)
	}
	return out
}

// spec is the part of a request that many requests of a batch share: the
// script's parameters for one limit (and, for the buckets, one cost). A
// batch sends each distinct spec once.
type spec struct {
	a, b   int64 // bucket: inc (N·interval), lim (the largest backlog admitted); windows: rate, period
	n      int64 // window: the cost
	t, tau int64 // bucket: the interval and Burst·interval, to convert a state made under another
	flag   bool  // window: sliding
}

// bucketCall is what a bucket request's decision is derived from, beside
// the backlog the script returns.
type bucketCall struct {
	t, tau   int64 // interval, Burst·interval
	leaky    bool
	maxDelay time.Duration
}

func specOf(sh shape, req ratelimit.Request) (spec, bucketCall) {
	lim := req.Limit.Normalize()
	switch sh {
	case shapeBucket:
		t := int64(lim.Interval())
		bc := bucketCall{t: t, tau: lim.Burst * t, leaky: req.Algorithm == ratelimit.LeakyBucket, maxDelay: req.MaxDelay}
		if req.Refund {
			// At most Burst back (gcra.Refund): −inc ≤ τ.
			return spec{a: -min(req.N, lim.Burst) * t, b: bc.tau, t: t, tau: bc.tau}, bc
		}
		if req.N == 0 {
			return spec{t: t, tau: bc.tau}, bc // a peek adds nothing
		}
		inc := req.N * t // N ≤ Burst (Apply peeks otherwise): inc ≤ τ
		sp := spec{a: inc, b: bc.tau - inc, t: t, tau: bc.tau}
		if bc.leaky && bc.maxDelay > 0 {
			sp.b = min(sp.b, int64(bc.maxDelay))
		}
		return sp, bc
	case shapeWindow:
		n := req.N
		if req.Refund {
			n = -min(n, ratelimit.MaxRate) // as window.Refund
		}
		return spec{a: lim.Rate, b: int64(lim.Period), n: n, flag: req.Algorithm == ratelimit.SlidingWindowCounter}, bucketCall{}
	}
	return spec{a: lim.Rate, b: int64(lim.Period)}, bucketCall{}
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// appendSpec appends sp's fields as window.lua reads them: rate, the
// period as seconds and nanoseconds, sliding, n.
func appendSpec(args []string, sp spec) []string {
	sec, ns := sp.b/int64(time.Second), sp.b%int64(time.Second)
	return append(args, strconv.FormatInt(sp.a, 10), strconv.FormatInt(sec, 10), strconv.FormatInt(ns, 10), bit(sp.flag), strconv.FormatInt(sp.n, 10))
}

// two53 marks a backlog gcra.lua returns in two parts.
const two53 = 1 << 53

// decodeBucket reads gcra.lua's reply: one backlog per call, from which
// the Go step derives the decision (the script has already applied it:
// the two must agree on admission). It returns what is left of the reply.
func decodeBucket(r []rueidis.RedisMessage, calls []*call, ds []ratelimit.Decision) ([]rueidis.RedisMessage, error) {
	for i, c := range calls {
		if len(r) == 0 {
			return nil, fmt.Errorf("%w: reply ends after %d of %d decisions", ErrScript, i, len(calls))
		}
		v, err := r[0].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("%w: malformed script reply: %v", ErrScript, err)
		}
		r = r[1:]
		admitted, backlog := v >= 0, v
		switch {
		case v == -two53:
			if len(r) < 2 {
				return nil, fmt.Errorf("%w: malformed script reply: a long backlog in %d parts", ErrScript, len(r))
			}
			s, err1 := r[0].AsInt64()
			ns, err2 := r[1].AsInt64()
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("%w: malformed script reply: %v", ErrScript, err)
			}
			r = r[2:]
			admitted, backlog = c.n == 0, s*int64(time.Second)+ns
		case v < 0:
			backlog = -v - 1
		}
		p := gcra.Params{Limit: c.lim, T: c.bucket.t, Tau: c.bucket.tau}
		gcra.StepCost(backlog, 0, c.n, c.bucket.leaky, c.bucket.maxDelay, &p, &ds[i])
		if ds[i].Allowed != admitted {
			return nil, fmt.Errorf("%w: the script and the Go step disagree on admitting a backlog of %v (n %d)", ErrScript, time.Duration(backlog), c.n)
		}
	}
	return r, nil
}

// decodeWindow reads window.lua's reply: the counts each call was decided
// on, from which the Go step derives the decision (the script has already
// applied it: the two must agree on admission). It returns what is left of
// the reply.
//
// It also forgets, in h, the windows whose plain-command charges did not
// stand, for the fixed-window charges it admitted in the window holding
// now: window.lua has written their windows.
func decodeWindow(r []rueidis.RedisMessage, calls []*call, ds []ratelimit.Decision, perNow bool, h *hints) ([]rueidis.RedisMessage, int64, error) {
	var err error
	next := func() int64 {
		if err != nil {
			return 0
		}
		if len(r) == 0 {
			err = fmt.Errorf("%w: window reply ends early (%d decisions)", ErrScript, len(calls))
			return 0
		}
		var v int64
		v, err = r[0].AsInt64()
		if err != nil {
			err = fmt.Errorf("%w: malformed script reply: %v", ErrScript, err)
		}
		r = r[1:]
		return v
	}
	var now int64
	if !perNow {
		now = next()*int64(time.Second) + next()
	}
	for i, c := range calls {
		if perNow {
			now = c.sec*int64(time.Second) + c.nsec
		}
		var st window.State
		if c.spec.flag {
			st.Prev = next()
		}
		v := next()
		admitted, long := v >= 0, v == -two53
		switch {
		case long:
			st.Start = next()*int64(time.Second) + next()
			admitted = next() == 1
			v = next()
		case v < 0:
			v = -v - 1
			fallthrough
		default:
			st.Start = windowStart(now, int64(c.lim.Period))
		}
		if err != nil {
			return nil, 0, err
		}
		st.Curr = v
		req := ratelimit.Request{Limit: c.lim, N: c.n}
		if c.spec.flag {
			_, ds[i] = window.Sliding(st, now, req)
		} else {
			_, ds[i] = window.Fixed(st, now, req)
		}
		if ds[i].Allowed != admitted {
			return nil, 0, fmt.Errorf("%w: the script and the Go step disagree on admitting n %d to the counts %+v at %d", ErrScript, c.n, st, now)
		}
		if p := int64(c.lim.Period); !c.spec.flag && admitted && !long && c.n > 0 && p%int64(time.Millisecond) == 0 {
			h.drop(c.key) // the script wrote the window: plain commands may go again
		}
	}
	return r, now, nil
}

// windowStart returns the start of the window of length w holding now, as
// internal/window's roll finds it.
func windowStart(now, w int64) int64 {
	now = max(now, math.MinInt64+w)
	m := now % w
	if m < 0 {
		m += w
	}
	return now - m
}

// decodeNext reads the next decision from log.lua's reply and returns it
// with the rest of the reply. The durations come in two parts, d + x·1s: a
// double cannot hold every duration up to 2·MaxWindow, an int64 can.
func decodeNext(msgs []rueidis.RedisMessage, lim ratelimit.Limit) (ratelimit.Decision, []rueidis.RedisMessage, error) {
	var r [7]int64
	n := 4
	for i := 0; i < n; i++ {
		if i >= len(msgs) {
			return ratelimit.Decision{}, nil, fmt.Errorf("%w: malformed script reply %v", ErrScript, r[:i])
		}
		v, err := msgs[i].AsInt64()
		if err != nil {
			return ratelimit.Decision{}, nil, fmt.Errorf("%w: malformed script reply: %v", ErrScript, err)
		}
		r[i] = v
		if i == 0 {
			if v < 0 || v > 3 {
				return ratelimit.Decision{}, nil, fmt.Errorf("%w: malformed script reply %v", ErrScript, r[:1])
			}
			if v&2 != 0 {
				n = 7
			}
		}
	}
	d := ratelimit.Decision{
		Allowed:    r[0]&1 == 1,
		Limit:      lim,
		Remaining:  r[1],
		RetryAfter: time.Duration(r[2]),
		ResetAfter: time.Duration(r[3]),
	}
	if n == 4 {
		return d, msgs[4:], nil
	}
	unit := int64(time.Second)
	d.Delay = time.Duration(r[4])
	d.RetryAfter += time.Duration(r[5] * unit)
	d.ResetAfter += time.Duration(r[6] * unit)
	return d, msgs[7:], nil
}
