package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/internal/tick"
	"github.com/sluicehq/sluice/ratelimit"
)

// call is one Apply waiting for its batch. Calls are recycled (Store.calls)
// once their Apply has taken a decision from them: nothing else refers to
// a call by then (the worker forgets its flight before finishing it, and
// the watchdog finishes only with errors, whose calls are not recycled).
type call struct {
	key       string
	mkey      string // the fixed-window marker's key (window shape)
	raw       string // the readable key, when its readable names share key's slot (keys.go); else ""
	spec      spec
	bucket    bucketCall
	n         int64
	sec, nsec int64 // now, when Options.Now is set
	lim       ratelimit.Limit
	unsat     bool            // the request can never be admitted: sent as a peek
	node      *redislink.Node // the breaker of the node serving key
	deadline  int64           // when queued plus the timeout, on the batcher's clock
	state     atomic.Uint32
	done      chan struct{} // buffered: finish sends once
	d         ratelimit.Decision
	err       error
}

// wait waits for c's result: nil, or the caller's context's error when it
// gave up first (c then belongs to its batch still).
func (c *call) wait(ctx context.Context) error {
	// The watchdog finishes the call at the timeout if Redis does not.
	done := ctx.Done()
	if done == nil {
		<-c.done
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-done:
		return ctx.Err()
	}
}

// finish hands c its result, once: the worker and the watchdog race to it.
func (c *call) finish(d ratelimit.Decision, err error) {
	if c.state.CompareAndSwap(0, 1) {
		c.d, c.err = d, err
		c.done <- struct{}{}
	}
}

// group is what calls must share to go in one script call: the script and,
// on a cluster, the hash slot (a script's keys must live in one slot), or
// the node serving it, nodeGroup + its index (nodes.go).
type group struct {
	shape shape
	slot  uint16
}

// flight is a batch on its way to Redis.
type flight struct {
	calls []*call
}

// batcher coalesces concurrent Applies into one script call per group, so
// that under load one round trip and one script run serve many decisions.
// A call waits for nothing but a free worker: with workers idle it goes out
// at once, alone; while all workers are busy, calls pile up and the next
// free worker takes up to max of them. Workers' calls share connections by
// rueidis's automatic pipelining.
//
// Each call has a deadline, the time it was queued plus the timeout, which
// holds while it is queued and while it is in flight, however many
// batches it waited behind. A watchdog fails the calls past their
// deadline, queued or in flight: some waits of the client library (a
// connection's handshake while Redis restarts) do not end with the
// call's context. It runs only while there are calls: the first call
// queued starts it, and it returns at a tick that finds none (an idle
// store wakes no one). A worker drops the calls past their deadline instead of
// sending them, and waits for a batch's reply only until the latest
// deadline of its calls.
type batcher struct {
	s       *Store
	max     int
	timeout int64
	epoch   time.Time
	mu      sync.Mutex
	cond    *sync.Cond
	pending map[group][]*call
	order   []group // groups with pending calls, oldest first
	flying  map[*flight]struct{}
	alone   map[*call]struct{} // callers' trials in flight (sendAlone), watched as flights are
	queued  int                // calls in pending
	nqueued atomic.Int64       // queued, for idle (written with mu held)
	nflying atomic.Int64       // len(flying), for idle
	nfast   atomic.Int64       // plain-command transactions in flight (fast.go)

	scriptCalls, requests atomic.Uint64 // for Stats
	commands              atomic.Uint64 // plain-command transactions (fast.go), for Stats
	fellBack              atomic.Uint64 // those whose answer did not stand
	minFill               int           // the fewest calls a batch sent while another is in flight takes: max/4
	timeoutErr            error         // what a call past its deadline gets
	closed                bool
	watching              bool          // the watchdog runs (mu held)
	every                 time.Duration // the watchdog's period
	stop                  chan struct{} // closed once the workers are done: stops the watchdog
	wg, watchWG           sync.WaitGroup
}

func newBatcher(s *Store, workers, maxBatch int, timeout time.Duration) *batcher {
	b := &batcher{
		s: s, max: maxBatch, timeout: int64(timeout), epoch: time.Now(),
		pending: make(map[group][]*call), flying: make(map[*flight]struct{}), alone: make(map[*call]struct{}),
		stop: make(chan struct{}), minFill: max(1, maxBatch/4), every: max(timeout/4, time.Millisecond),
		timeoutErr: fmt.Errorf("%w: no reply within %v", ErrUnavailable, timeout),
	}
	b.cond = sync.NewCond(&b.mu)
	b.wg.Add(workers)
	for range workers {
		go b.work()
	}
	return b
}

func (b *batcher) now() int64 { return int64(time.Since(b.epoch)) }

// admit gives c its deadline, from now, and locks b.mu; false (b.mu
// not held): the batcher is closed.
func (b *batcher) admit(c *call) bool {
	c.deadline = b.now() + b.timeout
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	return true
}

// submit queues c. It returns false when the batcher is closed.
func (b *batcher) submit(g group, c *call) bool {
	if !b.admit(c) {
		return false
	}
	q, ok := b.pending[g]
	if !ok || len(q) == 0 {
		b.order = append(b.order, g)
	}
	b.pending[g] = append(q, c)
	b.queued++
	b.nqueued.Store(int64(b.queued))
	wake := b.queued == 1 || b.queued == b.minFill
	b.watchLocked()
	b.mu.Unlock()
	if wake {
		b.cond.Broadcast()
	}
	return true
}

// watchLocked starts the watchdog unless it runs. Called with b.mu held.
func (b *batcher) watchLocked() {
	if !b.watching {
		b.watching = true
		b.watchWG.Add(1)
		go b.watch()
	}
}

// sendAlone sends c by itself in a goroutine of its own, holding no
// worker (a caller's trial of a node whose breaker is open: trial.go),
// with a queued call's deadline and watchdog: the caller's wait for c
// ends by its deadline whatever the client library does meanwhile (its
// connection attempts do not all end with the call's context: rueidis's
// callers of a connection being made wait for its handshake, whose
// failure can take a second more to close). It returns false when the
// batcher is closed; Close waits for the goroutine, as for the workers.
func (b *batcher) sendAlone(g group, c *call) bool {
	if !b.admit(c) {
		return false
	}
	b.alone[c] = struct{}{}
	b.watchLocked()
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		var sc scratch
		calls := []*call{c}
		ds, err := b.s.exec(g, calls, &sc, b.epoch.Add(time.Duration(c.deadline)))
		b.scriptCalls.Add(1)
		b.requests.Add(1)
		b.mu.Lock()
		delete(b.alone, c) // forgotten before finished, as a flight
		b.mu.Unlock()
		b.s.finish(calls, ds, err)
	}()
	return true
}

// idle reports whether a call submitted now would go out alone: none is
// queued, no script call is in flight, and fewer than maxFast
// plain-command transactions are. Under load calls go in batches, which
// cost both sides less a decision (docs/bench-redis.md).
func (b *batcher) idle() bool {
	return b.nqueued.Load() == 0 && b.nflying.Load() == 0 && b.nfast.Load() < maxFast
}

// maxFast bounds the plain-command transactions in flight: past it, calls
// go to the batcher, whose flight then sends the next ones there too.
const maxFast = 4

// ready reports whether a worker may take a batch: one is queued, and no
// other is in flight or enough calls wait to make a full batch worth a
// second flight (smaller ones cost more per decision than the overlap
// saves). Called with b.mu held.
func (b *batcher) ready() bool {
	return len(b.order) > 0 && (len(b.flying) == 0 || b.queued >= b.minFill)
}

func (b *batcher) work() {
	defer b.wg.Done()
	var sc scratch
	for {
		b.mu.Lock()
		for !b.ready() && !b.closed {
			b.cond.Wait()
		}
		if len(b.order) == 0 {
			b.mu.Unlock()
			return
		}
		g := b.order[0]
		b.order = b.order[1:]
		q := b.pending[g]
		take := q
		if len(q) > b.max {
			take = q[:b.max:b.max]
			b.pending[g] = q[b.max:]
			b.order = append(b.order, g)
		} else {
			delete(b.pending, g)
		}
		b.queued -= len(take)
		b.nqueued.Store(int64(b.queued))
		// The calls whose callers have stopped waiting are not sent.
		now, last := b.now(), int64(0)
		kept := take[:0]
		for _, c := range take {
			if now > c.deadline {
				c.finish(ratelimit.Decision{}, b.timeoutErr)
			} else {
				kept = append(kept, c)
				last = max(last, c.deadline)
			}
		}
		clear(take[len(kept):])
		take = kept
		if len(take) == 0 {
			b.mu.Unlock()
			continue
		}
		f := &flight{calls: take}
		b.flying[f] = struct{}{}
		b.nflying.Add(1)
		more := b.ready()
		b.mu.Unlock()
		if more {
			b.cond.Signal()
		}
		var ds []ratelimit.Decision
		var err error
		sent := 1
		if g.slot >= nodeGroup {
			ds, sent, err = b.s.execNode(g, take, &sc, b.epoch.Add(time.Duration(last)))
		} else {
			ds, err = b.s.exec(g, take, &sc, b.epoch.Add(time.Duration(last)))
		}
		b.scriptCalls.Add(uint64(sent))
		b.requests.Add(uint64(len(take)))
		b.mu.Lock()
		delete(b.flying, f)
		b.nflying.Add(-1)
		b.mu.Unlock()
		b.cond.Signal() // a small batch may go now
		b.s.finish(take, ds, err)
	}
}

// watch fails the calls older than the timeout, every tick, until a tick
// finds no call queued or in flight.
func (b *batcher) watch() {
	defer b.watchWG.Done()
	tick.While(b.stop, b.every, func(time.Time) bool { return b.failOverdue(b.now()) })
}

// failOverdue fails the calls queued or in flight past their deadline. It
// returns false, the watchdog stopped, when there are none left.
func (b *batcher) failOverdue(now int64) bool {
	err := b.timeoutErr
	b.mu.Lock()
	defer b.mu.Unlock()
	for g, q := range b.pending {
		kept := q[:0]
		for _, c := range q {
			if now > c.deadline {
				c.finish(ratelimit.Decision{}, err)
			} else {
				kept = append(kept, c)
			}
		}
		clear(q[len(kept):])
		b.queued -= len(q) - len(kept)
		b.nqueued.Store(int64(b.queued))
		b.pending[g] = kept
	}
	for f := range b.flying {
		for _, c := range f.calls {
			if now > c.deadline {
				c.finish(ratelimit.Decision{}, err)
			}
		}
	}
	for c := range b.alone {
		if now > c.deadline {
			c.finish(ratelimit.Decision{}, err)
		}
	}
	b.watching = b.queued > 0 || len(b.flying) > 0 || len(b.alone) > 0
	return b.watching
}

// close stops the workers after they have run what is queued, then the
// watchdog, which holds the calls' deadlines until then.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
	b.wg.Wait()
	close(b.stop)
	b.watchWG.Wait()
}

// finish hands every call of a batch its result, and its node's breaker
// the outcome.
func (s *Store) finish(calls []*call, ds []ratelimit.Decision, err error) {
	if len(calls) > 0 {
		s.report(calls[0].node, err)
	}
	for i, c := range calls {
		if err != nil {
			c.finish(ratelimit.Decision{}, err)
		} else {
			c.finish(ds[i], nil)
		}
	}
}

// scratch is a worker's memory for building and decoding batches, reused
// from one batch to the next (the client library copies what it keeps).
type scratch struct {
	keys, args []string
	nargs      []string // a node batch's ARGV (nodes.go)
	specs      []spec
	idx        []int
	ds         []ratelimit.Decision
	// specArgs caches each spec's ARGV fields, formatted: a batch's
	// limits are few and recur, so formatting them (up to five strings a
	// spec) costs nothing after the first batch. Bounded: cleared when it
	// passes maxSpecArgs.
	specArgs map[shapedSpec][]string
}

type shapedSpec struct {
	sh shape
	sp spec
}

const maxSpecArgs = 256

// exec runs one batch and returns its decisions, in sc. It waits for the
// reply until deadline, the latest of its calls'.
func (s *Store) exec(g group, calls []*call, sc *scratch, deadline time.Time) (ds []ratelimit.Decision, err error) {
	defer func() {
		// The client library must not take the caller down with it.
		if p := recover(); p != nil {
			ds, err = nil, fmt.Errorf("%w: client panicked: %v", ErrUnavailable, p)
		}
	}()
	keys := sc.keys[:0]
	for _, c := range calls {
		keys = append(keys, c.key)
		if g.shape == shapeWindow {
			keys = append(keys, c.mkey)
		}
	}
	sc.keys = keys
	s.scriptArgs(g.shape, calls, sc)
	script, args := s.scripts[g.shape], sc.args
	if g.slot >= nodeGroup {
		script, keys, args = s.nodes.scripts[g.shape], keys[:1], s.nodeArgs(g.shape, sc)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	sent := time.Now()
	reply, err := script.Exec(ctx, s.conn.Load().client, keys, args).ToArray()
	got := time.Now()
	clear(sc.keys) // let the keys go with their calls
	clear(sc.nargs)
	if err != nil {
		if g.slot >= nodeGroup && misrouted(err) {
			return nil, errMisrouted
		}
		return nil, s.failure(err, len(calls))
	}
	ds = slices.Grow(sc.ds[:0], len(calls))[:len(calls)]
	sc.ds = ds
	switch g.shape {
	case shapeBucket:
		reply, err = decodeBucket(reply, calls, ds)
	case shapeWindow:
		var now int64
		reply, now, err = decodeWindow(reply, calls, ds, s.opts.Now != nil, &s.hints)
		if err == nil && s.opts.Now == nil {
			s.clock.sample(now, sent, got)
		}
	default:
		for i, c := range calls {
			if ds[i], reply, err = decodeNext(reply, c.lim); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(reply) != 0 {
		return nil, fmt.Errorf("%w: %d integers left over after %d decisions", ErrScript, len(reply), len(calls))
	}
	return ds, nil
}

// distinct sets sc.specs to the distinct specs of calls, and sc.idx to
// each call's index among them (from 1). A batch rarely holds more than a
// few limits: a linear search is the fastest.
func distinct(calls []*call, sc *scratch) {
	specs, idx := sc.specs[:0], sc.idx[:0]
	for _, c := range calls {
		j := 0
		for j < len(specs) && specs[j] != c.spec {
			j++
		}
		if j == len(specs) {
			specs = append(specs, c.spec)
		}
		idx = append(idx, j+1)
	}
	sc.specs, sc.idx = specs, idx
}

// scriptArgs sets sc.args to the ARGV of the shape's script for calls: the
// shortest TTL, whether each call carries its own time (or, for a window
// on Redis's clock, whether to write the marker form), the batch's
// distinct specs, then for each call what the script cannot take from the
// batch: its spec's index (when specs differ; always for the log, which
// also takes each call's cost) and its time (with Options.Now).
func (s *Store) scriptArgs(sh shape, calls []*call, sc *scratch) {
	perNow := s.opts.Now != nil
	distinct(calls, sc)
	clock := bit(perNow)
	if sh == shapeWindow && !perNow && s.writesMarkers() {
		clock = "2" // the marker form of versions before the one key (window.lua)
	}
	args := append(sc.args[:0], strconv.FormatInt(s.minTTL, 10), clock, strconv.Itoa(len(sc.specs)))
	for _, sp := range sc.specs {
		k := shapedSpec{sh, sp}
		f, ok := sc.specArgs[k]
		if !ok {
			switch sh {
			case shapeWindow:
				f = appendSpec(nil, sp)
			case shapeBucket:
				f = []string{strconv.FormatInt(sp.a, 10), strconv.FormatInt(sp.b, 10), strconv.FormatInt(sp.t, 10), strconv.FormatInt(sp.tau, 10)}
			default:
				f = []string{strconv.FormatInt(sp.a, 10), strconv.FormatInt(sp.b, 10)}
			}
			if sc.specArgs == nil || len(sc.specArgs) >= maxSpecArgs {
				sc.specArgs = make(map[shapedSpec][]string)
			}
			sc.specArgs[k] = f
		}
		args = append(args, f...)
	}
	log, many := sh == shapeLog, len(sc.specs) > 1
	if log || many || perNow {
		for i, c := range calls {
			if log || many {
				args = append(args, strconv.Itoa(sc.idx[i]))
			}
			if log {
				args = append(args, strconv.FormatInt(c.n, 10))
			}
			if perNow {
				args = append(args, strconv.FormatInt(c.sec, 10), strconv.FormatInt(c.nsec, 10))
			}
		}
	}
	sc.args = s.appendLegacy(args, sh, calls)
}

// appendLegacy appends lua/legacy.lua's tail: the calls' readable keys,
// the prefix, the shape's tags, and the number of calls.
func (s *Store) appendLegacy(args []string, sh shape, calls []*call) []string {
	for _, c := range calls {
		args = append(args, c.raw)
	}
	tags := shapeInfo[sh].tag
	if sh == shapeWindow {
		tags += "m"
	}
	return append(args, s.opts.Prefix, tags, strconv.Itoa(len(calls)))
}
