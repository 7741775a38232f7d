package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// The fixed window's plain-command path (a lone decision must not
// cost Redis more than envoyproxy/ratelimit's INCRBY + EXPIRE).
//
// A fixed window whose period is a whole number of milliseconds keeps its
// count as an integer, in a key named after its window: marker key
// Prefix+"m{"+key+"}" holds "period:start" (milliseconds) and names the
// count's key, marker key + ":" + marker; both keys expire together at the
// window's last millisecond. A charge that would go out alone (the store
// idle: nothing queued, no script call in flight, fewer than maxFast such
// charges in flight) is sent as one transaction of plain commands instead
// of a script call:
//
//	MULTI · TIME · SET marker window NX GET PXAT end-1 · EXISTS binary state
//	(and the readable names of before compact ones, keys.go) ·
//	INCRBY count n · PEXPIREAT count end-1 NX · EXEC
//
// (without TIME when Options.Now is set; PX and PEXPIRE of MinTTLWithNow
// then). Its answer stands when the marker named the window the request's
// time falls in, or none (and no binary state holds the key): the count
// after the increment is then the script's state plus n, and the Go step
// (window.Fixed) decides from it exactly as from window.lua's reply. A
// denied charge takes its n back (undo.lua, awaited). When the marker names
// another window (the window rolled, the limit's period changed, a sliding
// counter or an old value holds the key) the increment went to a key that
// is not the state: undo.lua takes it back and the request goes to the
// script. Until an undo lands, the count it concerns is n too high: other
// requests may be denied that would have been admitted (transient
// under-admission, never over-admission).
//
// A charge that finds no marker names the window itself (SET NX), so that
// the first charge of a window, the usual case for a key that is not hot,
// costs no script either; if its answer does not stand, undo.lua removes
// that marker when its window has not begun on Redis's clock. A script
// call writes the integer form for keys that have a marker, and the binary
// form (one write) for the others, so that batches of keys that plain
// commands do not use cost what they did; a charge that finds the binary
// form leaves its marker, and the script call that decides it next moves
// the key to the integer form.
//
// The store tries the path only when it expects it to hold: after a charge
// that did not stand, the key's charges in that window go to the script
// until one is admitted there (hints); and with Redis's clock it estimates
// that clock from the TIME replies and stays off the path within the
// estimate's uncertainty (half the last round trip, plus a millisecond) of
// a window's edge.

// fastEligible reports whether req may go as plain commands: a fixed
// window's charge of a whole-millisecond period.
func fastEligible(req ratelimit.Request, lim ratelimit.Limit) bool {
	return req.Algorithm == ratelimit.FixedWindow && lim.Period%time.Millisecond == 0 && req.N > 0 && !req.Refund
}

// hint is a window (ms) in which a key's plain-command charge did not
// stand.
type hint struct{ period, start int64 }

// hints remembers, per Redis key, the window in which its last
// plain-command charge did not stand, so that the key's next charges in
// that window go to the script at once, until a script call admits one
// (and names the window). Bounded: cleared when it passes maxHints.
type hints struct {
	mu sync.Mutex
	m  map[string]hint
}

const maxHints = 1 << 16

func (h *hints) get(k string) (hint, bool) {
	h.mu.Lock()
	v, ok := h.m[k]
	h.mu.Unlock()
	return v, ok
}

func (h *hints) put(k string, v hint) {
	h.mu.Lock()
	if h.m == nil || len(h.m) >= maxHints {
		h.m = make(map[string]hint)
	}
	h.m[k] = v
	h.mu.Unlock()
}

func (h *hints) drop(k string) {
	h.mu.Lock()
	delete(h.m, k)
	h.mu.Unlock()
}

// redisClock estimates Redis's clock from this process's: offset is the
// last TIME reply minus the local time halfway between sending and
// receiving it, unc half that round trip.
type redisClock struct {
	offset, unc atomic.Int64
	known       atomic.Bool
}

func (c *redisClock) sample(server int64, sent, got time.Time) {
	half := got.Sub(sent) / 2
	c.offset.Store(server - sent.Add(half).UnixNano())
	c.unc.Store(int64(half))
	c.known.Store(true)
}

// now returns the estimate of Redis's time and its uncertainty.
func (c *redisClock) now() (int64, int64, bool) {
	if !c.known.Load() {
		return 0, 0, false
	}
	return time.Now().UnixNano() + c.offset.Load(), c.unc.Load(), true
}

// fast tries to decide c (a lone, fastEligible charge) with plain commands.
// ok is false when the script must decide it (nothing was left counted).
func (s *Store) fast(ctx context.Context, cn *conn, c *call, useNow bool) (d ratelimit.Decision, ok bool, err error) {
	w := int64(c.lim.Period)
	now, ok := s.fastNow(c, w, useNow)
	if !ok {
		return d, false, nil
	}
	start := windowStart(now, w)
	h := hint{period: w / int64(time.Millisecond), start: start / int64(time.Millisecond)}
	if got, found := s.hints.get(c.key); found && got == h {
		return d, false, nil // this window's last charge did not stand
	}
	mval := strconv.FormatInt(h.period, 10) + ":" + strconv.FormatInt(h.start, 10)
	fkey := c.mkey + ":" + mval
	// The caller's cancellation does not reach Redis, as a batched call's
	// does not: a charge Redis made is finished (its undo included), and
	// a caller that goes away is not a failure of Redis, which would count
	// towards the breaker (three cancelled requests in a row opened it).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
	defer cancel()
	s.batch.nfast.Add(1)
	defer s.batch.nfast.Add(-1)
	sent := time.Now()
	res := cn.client.DoMulti(ctx, s.fastCmds(cn, c, h, mval, fkey, useNow)...)
	got := time.Now()
	s.batch.commands.Add(1)
	r, answered, err := s.fastReply(res, useNow, sent, got)
	if err != nil || !answered {
		return d, false, err
	}
	if useNow {
		r.now = now
	}
	if (!r.set && r.marker != mval) || r.binary != 0 || windowStart(r.now, w) != start {
		// Counted in a key that is not the state: take it back, and let
		// the script decide (and name the window).
		s.batch.fellBack.Add(1)
		s.hints.put(c.key, h)
		clear, at := "", ""
		if r.set {
			clear = mval
			if !useNow {
				at = strconv.FormatInt(h.start, 10)
			}
		}
		return d, false, s.undo(ctx, cn, c, fkey, clear, at)
	}
	st := window.State{Start: start, Curr: r.count - c.n}
	_, d = window.Fixed(st, r.now, ratelimit.Request{Limit: c.lim, N: c.n})
	if d.Allowed != (r.count <= c.lim.Rate) {
		return d, false, fmt.Errorf("%w: the count %d and the Go step disagree on admitting n %d", ErrScript, r.count, c.n)
	}
	if !d.Allowed {
		// A denial consumes nothing.
		if err := s.undo(ctx, cn, c, fkey, "", ""); err != nil {
			return d, false, err
		}
	}
	return d, true, nil
}

// fastNow returns the time c's charge is dated (Options.Now's, or the
// estimate of Redis's clock); ok false when it must go to the script:
// Redis's clock not estimated yet, or too close to a window's edge to
// tell the window.
func (s *Store) fastNow(c *call, w int64, useNow bool) (int64, bool) {
	if useNow {
		return c.sec*int64(time.Second) + c.nsec, true
	}
	est, unc, known := s.clock.now()
	if !known {
		return 0, false
	}
	start := windowStart(est, w)
	guard := unc + int64(time.Millisecond)
	if est-start < guard || start+w-est <= guard {
		return 0, false
	}
	return est, true
}

// fastCmds returns the transaction of c's charge in window h (marker
// value mval, count key fkey).
func (s *Store) fastCmds(cn *conn, c *call, h hint, mval, fkey string, useNow bool) rueidis.Commands {
	b := cn.client.B()
	cmds := make(rueidis.Commands, 0, 7)
	cmds = append(cmds, b.Multi().Build())
	if useNow {
		cmds = append(cmds, b.Set().Key(c.mkey).Value(mval).Nx().Get().PxMilliseconds(s.minTTL).Build())
	} else {
		cmds = append(cmds, b.Time().Build(), b.Set().Key(c.mkey).Value(mval).Nx().Get().Pxat(time.UnixMilli(h.start+h.period-1)).Build())
	}
	// The binary state, and any state under the readable names of before
	// (keys.go): the script reads those.
	exists := []string{c.key}
	if c.raw != "" {
		exists = append(exists, s.readable(shapeInfo[shapeWindow].tag, c.raw), s.readable("m", c.raw))
	}
	cmds = append(cmds, b.Exists().Key(exists...).Build(), b.Incrby().Key(fkey).Increment(c.n).Build())
	if useNow {
		cmds = append(cmds, b.Pexpire().Key(fkey).Milliseconds(s.minTTL).Nx().Build())
	} else {
		cmds = append(cmds, b.Pexpireat().Key(fkey).MillisecondsTimestamp(h.start+h.period-1).Nx().Build())
	}
	return append(cmds, b.Exec().Build())
}

// fastResult is what a charge's transaction answered.
type fastResult struct {
	now    int64  // Redis's TIME (without Options.Now)
	set    bool   // no marker before: this charge named the window
	marker string // else the marker's value
	binary int64  // how many of the binary state and the readable names' hold the key
	count  int64  // the count after the increment
}

// fastReply reads the transaction's replies; answered false and no error
// when the server refused the transaction (scripts only from now on).
func (s *Store) fastReply(res []rueidis.RedisResult, useNow bool, sent, got time.Time) (r fastResult, answered bool, err error) {
	replies, err := res[len(res)-1].ToArray()
	if err != nil {
		for _, x := range res {
			if e := x.Error(); e != nil {
				err = e
				break
			}
		}
		if refusedTx(err) {
			// The server refused the transaction (a Redis before 7.0 has no
			// SET NX GET, no PEXPIREAT NX; an ACL may forbid MULTI):
			// nothing ran. Scripts only from now on.
			s.noFast.Store(true)
			if s.opts.OnFailure != nil {
				s.opts.OnFailure(fmt.Errorf("redisstore: plain-command charges refused, scripts only from now on: %w", err))
			}
			return r, false, nil
		}
		return r, false, s.failure(err, 1)
	}
	want := 5
	if useNow {
		want = 4
	}
	if len(replies) != want {
		return r, false, fmt.Errorf("%w: a transaction of %d commands answered %d replies", ErrScript, want, len(replies))
	}
	if !useNow {
		t, err := replies[0].AsIntSlice()
		if err != nil || len(t) != 2 {
			return r, false, fmt.Errorf("%w: malformed TIME reply: %v", ErrScript, err)
		}
		r.now = t[0]*int64(time.Second) + t[1]*int64(time.Microsecond)
		s.clock.sample(r.now, sent, got)
		replies = replies[1:]
	}
	// The marker before: none (this charge named the window), or one.
	r.set = replies[0].IsNil()
	marker, merr := replies[0].ToString()
	binary, err1 := replies[1].AsInt64()
	count, err2 := replies[2].AsInt64()
	if (merr != nil && !r.set) || err1 != nil || err2 != nil {
		return r, false, fmt.Errorf("%w: malformed transaction reply: %v", ErrScript, replies)
	}
	r.marker, r.binary, r.count = marker, binary, count
	return r, true, nil
}

// undo runs undo.lua: c's n back from the count at fkey, or, when clear is
// the marker c set and it names no state, the marker and the count gone.
func (s *Store) undo(ctx context.Context, cn *conn, c *call, fkey, clear, at string) error {
	if err := s.undoScript.Exec(ctx, cn.client, []string{fkey, c.mkey}, []string{strconv.FormatInt(c.n, 10), clear, at}).Error(); err != nil {
		return s.failure(err, 1)
	}
	return nil
}

// refusedTx reports whether err says the server does not run the
// transaction's commands (an old version, an ACL), which retrying would
// not change; an outage's replies (LOADING, CLUSTERDOWN, …) are not that.
func refusedTx(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok || rueidis.IsRedisNil(err) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"EXECABORT", "NOPERM", "syntax", "unknown command", "wrong number"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
