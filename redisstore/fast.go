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
// On Redis's clock, a fixed window whose period is a whole number of
// milliseconds keeps its count in its one key (Store.Key) as an integer,
// with its window in the key's expiry: the key expires at the window's
// end (Unix ms; Redis keeps a key until its clock passes the expiry). A
// charge that would go out alone (the store idle: nothing queued, no
// script call in flight, fewer than maxFast such charges in flight) is
// sent as one transaction of plain commands instead of a script call:
//
//	MULTI · TIME · EXISTS marker [readable names] · INCRBY key n ·
//	PEXPIREAT key end NX · PEXPIRETIME key · EXEC
//
// Its answer stands when PEXPIRETIME is the end of the window of the
// request (the store's estimate of Redis's clock picks it) and TIME falls
// in that window: the count after the increment is then the script's
// state plus n, and the Go step (window.Fixed) decides from it exactly as
// from window.lua's reply. A key of another window, of a period that
// changed, or that a PEXPIREAT in the past deleted (the estimate behind
// Redis's clock: PEXPIRETIME -2, nothing counted) does not stand; a key
// with no expiry (no version writes one) is adopted by the window, its
// count counted, as the script would. A key that holds a binary state (a
// sliding counter's, a period not of whole milliseconds) fails INCRBY
// inside EXEC, "not an integer": nothing counted, and the script decides.
// The EXISTS looks for the forms the script reads elsewhere: the marker
// form below, which versions before wrote on Redis's clock too and a
// store writes in its compatibility window (any instance may start
// beside this one: always looked for), and, while they may be there
// (readsLegacy: the first hour and two periods after the store starts),
// the readable names of before compact ones (keys.go); a charge that
// finds one goes to the script.
//
// A charge whose answer does not stand is taken back (undo.lua, from the
// key only while its expiry is the one the transaction saw, so never from
// another window's count) and goes to the script; a denied one is taken
// back too (a denial consumes nothing), awaited. Until an undo lands, the
// count is n too high: other requests may be denied that would have been
// admitted (transient under-admission, never over-admission).
//
// window.lua reads the integer form (PEXPIRETIME) and writes it for every
// whole-millisecond fixed window on Redis's clock: the same one write as
// the binary form (SET … PXAT, or KEEPTTL in the same window). Its period
// is not kept: a window that ends where the request's does, or ends first
// and holds now, is the request's current window (for a period that
// changed, where window.Rescale puts the count; the key is then moved to
// the request's window whatever the decision); one that ends later stays
// the request's period's window ending there (time that went back, as
// window.Fixed keeps the newest window; or a longer period before, whose
// count then lasts to its end, longer than Rescale's: never fewer
// counted).
//
// The marker form: a marker key Prefix+"m{"+key+"}" holds "period:start"
// (milliseconds) and names the count's key, marker key + ":" + marker.
// With Options.Now (tests, simulations: relative expiries of at least
// MinTTLWithNow) a window cannot be put in an absolute expiry, and the
// store writes this form:
//
//	MULTI · SET marker window NX GET PX min · EXISTS key (and the readable
//	names) · INCRBY count n · PEXPIRE count min NX · EXEC
//
// standing when the marker named the request's window, or none, and no
// other state holds the key; window.lua writes this form for keys that
// have a marker, the binary form for the others. On Redis's clock, for
// Options.CompatWindow after the store starts (writesMarkers), it writes
// only what versions before the one key read, as they wrote it, so that
// a fleet upgraded one instance at a time never has one of them meet the
// one key: lone charges send their transaction, whose keys expire at the
// window's last millisecond,
//
//	MULTI · TIME · SET marker window NX GET PXAT end-1 · EXISTS key (and
//	the readable names) · INCRBY count n · PEXPIREAT count end-1 NX · EXEC
//
// (a marker it set for a window that has not begun on Redis's clock, the
// estimate ahead, is removed by the undo), and window.lua writes the
// marker form for keys that have a marker, the binary form for the
// others; it reads the one key too, and moves it.
//
// The store tries the path only when it expects it to hold: after a charge
// that did not stand, the key's charges in that window go to the script
// until one is admitted there in the window holding now (hints); and with
// Redis's clock it estimates that clock from the TIME replies and stays
// off the path within the estimate's uncertainty (half the last round
// trip, plus a millisecond) of a window's edge.

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
	// The caller's cancellation does not reach Redis, as a batched call's
	// does not: a charge Redis made is finished (its undo included), and
	// a caller that goes away is not a failure of Redis, which would count
	// towards the breaker (three cancelled requests in a row opened it).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
	defer cancel()
	s.batch.nfast.Add(1)
	defer s.batch.nfast.Add(-1)
	var ch charge
	if useNow || s.writesMarkers() {
		ch, ok, err = s.markerCharge(ctx, cn, c, h, useNow)
		if useNow {
			ch.now = now
		}
	} else {
		ch, ok, err = s.keyCharge(ctx, cn, c, h)
	}
	s.batch.commands.Add(1)
	if err != nil || !ok {
		return d, false, err
	}
	if !ch.stands || windowStart(ch.now, w) != start {
		// Counted in a key that is not the state (or nothing counted):
		// take it back, and let the script decide (and name the window).
		s.batch.fellBack.Add(1)
		s.hints.put(c.key, h)
		return d, false, s.undo(ctx, cn, c, ch)
	}
	ch.set = "" // the marker it set names the state
	st := window.State{Start: start, Curr: ch.count - c.n}
	_, d = window.Fixed(st, ch.now, ratelimit.Request{Limit: c.lim, N: c.n})
	if d.Allowed != (ch.count <= c.lim.Rate) {
		return d, false, fmt.Errorf("%w: the count %d and the Go step disagree on admitting n %d", ErrScript, ch.count, c.n)
	}
	if !d.Allowed {
		// A denial consumes nothing.
		if err := s.undo(ctx, cn, c, ch); err != nil {
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

// charge is what a plain-command charge's transaction answered.
type charge struct {
	now    int64  // Redis's TIME (Options.Now's time with it)
	count  int64  // the count after the increment
	stands bool   // the count is the state's (the window's still to check)
	key    string // where the increment went ("": nowhere, nothing to undo)
	exp    string // that key's expiry as the transaction left it (Unix ms), or "" (a marker's count)
	set    string // the marker the charge set on Redis's clock (it found none), or ""
	start  string // that marker's window's start (Unix ms)
}

// keyCharge charges c in window h as one transaction of plain commands on
// its one key (Redis's clock):
//
//	MULTI · TIME · EXISTS marker [readable names] · INCRBY key n ·
//	PEXPIREAT key end NX · PEXPIRETIME key · EXEC
//
// The count stands when the key expires at the end of h (and no form
// the script reads elsewhere holds the key). ok false and no error when
// the server refused the transaction.
func (s *Store) keyCharge(ctx context.Context, cn *conn, c *call, h hint) (ch charge, ok bool, err error) {
	end := h.start + h.period
	b := cn.client.B()
	cmds := make(rueidis.Commands, 0, 7)
	cmds = append(cmds, b.Multi().Build(), b.Time().Build())
	// States the script reads that are not in the key: the marker form
	// (of versions before, and of any store in its compatibility window,
	// writesMarkers, which may start at any time beside this one) and,
	// while they may be there, the readable names of before compact ones
	// (keys.go).
	exists := []string{c.mkey}
	if c.raw != "" {
		exists = append(exists, s.readable(shapeInfo[shapeWindow].tag, c.raw), s.readable("m", c.raw))
	}
	cmds = append(cmds, b.Exists().Key(exists...).Build(), b.Incrby().Key(c.key).Increment(c.n).Build(),
		b.Pexpireat().Key(c.key).MillisecondsTimestamp(end).Nx().Build(),
		b.Pexpiretime().Key(c.key).Build(), b.Exec().Build())
	replies, now, ok, err := s.timedTx(ctx, cn, cmds, 5)
	if err != nil || !ok {
		return ch, ok, err
	}
	ch.now = now
	others, err1 := replies[0].AsInt64()
	count, ierr := replies[1].AsInt64()
	exp, err := replies[3].AsInt64()
	if err != nil || err1 != nil {
		return ch, false, fmt.Errorf("%w: malformed transaction reply: %v", ErrScript, replies)
	}
	if ierr != nil {
		if _, isRedis := rueidis.IsRedisErr(ierr); !isRedis {
			return ch, false, fmt.Errorf("%w: malformed transaction reply: %v", ErrScript, replies)
		}
		// Not an integer: a binary state (a sliding counter's, a period
		// not of whole milliseconds, ...) holds the key. Nothing counted.
		return ch, true, nil
	}
	ch.count = count
	if exp != -2 { // else a PEXPIREAT in the past deleted the key, and the increment
		ch.key, ch.exp = c.key, strconv.FormatInt(exp, 10)
	}
	ch.stands = others == 0 && exp == end && count >= c.n
	return ch, true, nil
}

// markerCharge charges c in window h in the marker form: a marker names
// the window, and the count is a key of its own (the marker key + ":" +
// the marker). With Options.Now, whose time cannot be put in an absolute
// expiry:
//
//	MULTI · SET marker window NX GET PX min · EXISTS key (and the readable
//	names) · INCRBY count n · PEXPIRE count min NX · EXEC
//
// and on Redis's clock during the compatibility window (writesMarkers),
// the transaction of versions before the one key, whose keys expire at
// the window's last millisecond:
//
//	MULTI · TIME · SET marker window NX GET PXAT end-1 · EXISTS key (and
//	the readable names) · INCRBY count n · PEXPIREAT count end-1 NX · EXEC
//
// The count stands when the marker named h, or none, and no other state
// holds the key.
func (s *Store) markerCharge(ctx context.Context, cn *conn, c *call, h hint, useNow bool) (ch charge, ok bool, err error) {
	mval := strconv.FormatInt(h.period, 10) + ":" + strconv.FormatInt(h.start, 10)
	fkey := c.mkey + ":" + mval
	last := time.UnixMilli(h.start + h.period - 1)
	b := cn.client.B()
	cmds := make(rueidis.Commands, 0, 7)
	cmds = append(cmds, b.Multi().Build())
	if useNow {
		cmds = append(cmds, b.Set().Key(c.mkey).Value(mval).Nx().Get().PxMilliseconds(s.minTTL).Build())
	} else {
		cmds = append(cmds, b.Time().Build(), b.Set().Key(c.mkey).Value(mval).Nx().Get().Pxat(last).Build())
	}
	// The binary state, and any state under the readable names of before
	// (keys.go): the script reads those.
	exists := []string{c.key}
	if c.raw != "" {
		exists = append(exists, s.readable(shapeInfo[shapeWindow].tag, c.raw), s.readable("m", c.raw))
	}
	cmds = append(cmds, b.Exists().Key(exists...).Build(), b.Incrby().Key(fkey).Increment(c.n).Build())
	var replies []rueidis.RedisMessage
	if useNow {
		cmds = append(cmds, b.Pexpire().Key(fkey).Milliseconds(s.minTTL).Nx().Build(), b.Exec().Build())
		replies, ok, err = s.execReplies(cn.client.DoMulti(ctx, cmds...), 4)
	} else {
		cmds = append(cmds, b.Pexpireat().Key(fkey).MillisecondsTimestamp(last.UnixMilli()).Nx().Build(), b.Exec().Build())
		replies, ch.now, ok, err = s.timedTx(ctx, cn, cmds, 5)
	}
	if err != nil || !ok {
		return ch, ok, err
	}
	// The marker before: none (this charge named the window), or one.
	set := replies[0].IsNil()
	marker, merr := replies[0].ToString()
	others, err1 := replies[1].AsInt64()
	count, err2 := replies[2].AsInt64()
	if (merr != nil && !set) || err1 != nil || err2 != nil {
		return ch, false, fmt.Errorf("%w: malformed transaction reply: %v", ErrScript, replies)
	}
	ch.count, ch.key = count, fkey
	ch.stands = (set || marker == mval) && others == 0
	if set && !useNow {
		// A marker of a window that has not begun on Redis's clock (the
		// estimate ahead of it) names no state: the undo removes it.
		ch.set, ch.start = mval, strconv.FormatInt(h.start, 10)
	}
	return ch, true, nil
}

// timedTx sends cmds, a transaction of want commands whose first is TIME,
// and returns the other replies and Redis's time, with which it samples
// the clock estimate; ok false and no error when the server refused it.
func (s *Store) timedTx(ctx context.Context, cn *conn, cmds rueidis.Commands, want int) (replies []rueidis.RedisMessage, now int64, ok bool, err error) {
	sent := time.Now()
	res := cn.client.DoMulti(ctx, cmds...)
	got := time.Now()
	replies, ok, err = s.execReplies(res, want)
	if err != nil || !ok {
		return nil, 0, ok, err
	}
	t, err := replies[0].AsIntSlice()
	if err != nil || len(t) != 2 {
		return nil, 0, false, fmt.Errorf("%w: malformed TIME reply: %v", ErrScript, err)
	}
	now = t[0]*int64(time.Second) + t[1]*int64(time.Microsecond)
	s.clock.sample(now, sent, got)
	return replies[1:], now, true, nil
}

// execReplies returns the replies of a transaction of want commands; ok
// false and no error when the server refused it (scripts only from now
// on).
func (s *Store) execReplies(res []rueidis.RedisResult, want int) (replies []rueidis.RedisMessage, ok bool, err error) {
	replies, err = res[len(res)-1].ToArray()
	if err != nil {
		for _, x := range res {
			if e := x.Error(); e != nil {
				err = e
				break
			}
		}
		if refusedTx(err) {
			// The server refused the transaction (a Redis before 7.0 has no
			// SET NX GET, no PEXPIREAT NX, no PEXPIRETIME; an ACL may forbid
			// MULTI): nothing ran. Scripts only from now on.
			s.noFast.Store(true)
			if s.opts.OnFailure != nil {
				s.opts.OnFailure(fmt.Errorf("redisstore: plain-command charges refused, scripts only from now on: %w", err))
			}
			return nil, false, nil
		}
		return nil, false, s.failure(err, 1)
	}
	if len(replies) != want {
		return nil, false, fmt.Errorf("%w: a transaction of %d commands answered %d replies", ErrScript, want, len(replies))
	}
	return replies, true, nil
}

// undo runs undo.lua: ch's n back from the count it went to, as long as
// that key is still the one it counted in (its expiry unchanged); or, when
// ch set a marker whose window has not begun on Redis's clock, the marker
// and its count gone.
func (s *Store) undo(ctx context.Context, cn *conn, c *call, ch charge) error {
	if ch.key == "" {
		return nil
	}
	if err := s.undoScript.Exec(ctx, cn.client, []string{ch.key, c.mkey}, []string{strconv.FormatInt(c.n, 10), ch.exp, ch.set, ch.start}).Error(); err != nil {
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
