package redislink

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrDown is wrapped by the error a Node reports while its breaker is
// open, unless Options.Unavailable names the store's own.
var ErrDown = errors.New("redislink: redis unavailable")

// Defaults for the zero Options.
const (
	DefaultThreshold   = 3
	DefaultCooldown    = time.Second
	DefaultMaxCooldown = 5 * time.Second
	DefaultTrial       = 100 * time.Millisecond
)

// Options configures a Link.
type Options struct {
	// Threshold is the number of consecutive failed calls to a node that
	// opens its breaker. Default 3; negative never opens it.
	Threshold int
	// Cooldown and MaxCooldown bound the background prober's waits: the
	// first after Cooldown, each failed probe doubling the next up to
	// MaxCooldown (Backoff). Defaults 1 s and 5 s.
	Cooldown, MaxCooldown time.Duration
	// Trial is the least time between two callers' trials of a node whose
	// breaker is open: one caller's request goes to Redis (the others get
	// the breaker's error at once) and its success closes the breaker, so
	// that decisions go back to Redis within about Trial after it answers,
	// whatever the prober's backoff. Default 100 ms; negative: no caller
	// trials, only the prober closes a breaker.
	Trial time.Duration
	// OnHealth, when set, is called with the link's Health each time
	// Connected changes. It must not block.
	OnHealth func(Health)
	// Unavailable is wrapped by the error calls get while a breaker is
	// open (the store's ErrUnavailable). Default ErrDown.
	Unavailable error
}

// Health is what a Link knows of its connection to Redis, for a server's
// metrics and readiness detail.
type Health struct {
	// Connected reports whether every node's breaker is closed: decisions
	// go to Redis. When false, calls to the nodes whose breaker is open
	// (NodesDown of them; on a standalone server, the one) are answered
	// by the store's failure policy at once, one caller's request at a
	// time tries Redis again (Options.Trial), and a background prober
	// probes them.
	Connected bool
	// NodesDown is the number of nodes whose breaker is open (a Cluster's
	// primaries, as the slot map names them; 1 for a standalone server),
	// and Nodes the primaries of the slot map (0 without one: a
	// standalone server, or a Cluster whose map is not read yet).
	NodesDown, Nodes int
	// Since is when Connected last changed (when the link was made, at
	// first).
	Since time.Time
	// LastError is the last failure: a failed call to Redis, a failed
	// connection attempt or probe. It stays after Redis is back, until
	// the next failure replaces it; nil when there was none.
	LastError error
	// Failures counts the failed calls to Redis (each a batch of
	// requests), connection attempts and probes.
	Failures uint64
	// Reconnects counts the times a node's breaker closed after opening
	// (or the first connection of a store that started without Redis).
	Reconnects uint64
}

// String describes h in one line: "connected since 2026-01-02T15:04:05Z
// (0 failures, 0 reconnects)", or "disconnected since … (12 failures, 1
// reconnects; 1 of 3 nodes down; last error: …)".
func (h Health) String() string {
	state := "connected"
	if !h.Connected {
		state = "disconnected"
	}
	s := fmt.Sprintf("%s since %s (%d failures, %d reconnects", state, h.Since.UTC().Format(time.RFC3339), h.Failures, h.Reconnects)
	if h.Nodes > 0 && h.NodesDown > 0 {
		s += fmt.Sprintf("; %d of %d nodes down", h.NodesDown, h.Nodes)
	}
	if h.LastError != nil {
		s += "; last error: " + h.LastError.Error()
	}
	return s + ")"
}

// Link is the state of a store's connection to Redis: one breaker per
// node (a standalone server is one node; a Cluster's calls whose node is
// not known yet share the link's Whole node), the caller trials that close
// them, the prober's schedule, and the health it sums up. It runs on the
// real clock: it measures an outage, not limiter time. A Link is safe for
// concurrent use; the stores on one Redis may share one.
type Link struct {
	opts  Options
	whole *Node
	wake  chan struct{} // buffered: a node went down, the prober starts
	slots atomic.Pointer[Slots]

	mu         sync.Mutex
	nodes      map[string]*Node // by address, of the current slot map
	down       int              // nodes whose breaker is open
	since      time.Time
	last       error
	failures   uint64
	reconnects uint64
}

// Node is one node's breaker.
type Node struct {
	l    *Link
	name string

	open  atomic.Bool  // fast path: false while the node answers
	clean atomic.Bool  // no failure since the last success
	next  atomic.Int64 // Unix ns: the earliest next caller trial
	err   atomic.Pointer[error]

	// With l.mu held:
	consecutive int
	gone        bool // no longer in the slot map
	reason      string
	since       time.Time
}

// New returns a Link, every breaker closed.
func New(o Options) *Link {
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Threshold < 0 {
		o.Threshold = int(^uint(0) >> 1)
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.MaxCooldown <= 0 {
		o.MaxCooldown = max(DefaultMaxCooldown, o.Cooldown)
	}
	o.MaxCooldown = max(o.MaxCooldown, o.Cooldown)
	if o.Trial == 0 {
		o.Trial = DefaultTrial
	}
	if o.Unavailable == nil {
		o.Unavailable = ErrDown
	}
	l := &Link{opts: o, wake: make(chan struct{}, 1), since: time.Now(), nodes: map[string]*Node{}}
	l.whole = l.newNode("")
	return l
}

func (l *Link) newNode(name string) *Node {
	n := &Node{l: l, name: name, since: time.Now()}
	n.clean.Store(true)
	return n
}

// Whole returns the node of a standalone server, and of a Cluster's calls
// whose node the slot map does not name.
func (l *Link) Whole() *Node { return l.whole }

// Wake is the prober's signal: it receives when a node's breaker opens.
func (l *Link) Wake() <-chan struct{} { return l.wake }

// AnyDown reports whether a breaker is open.
func (l *Link) AnyDown() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down > 0
}

// Cooldown is the first wait of the prober, and what a Deny policy
// answers as RetryAfter.
func (l *Link) Cooldown() time.Duration { return l.opts.Cooldown }

// Backoff returns the prober's wait before probe n (from 0) of an outage:
// the cooldown, doubled after each failed probe up to the max cooldown,
// and lengthened by a random fraction of up to a quarter, so that the
// instances of a fleet that lost Redis together do not probe in step.
func (l *Link) Backoff(n int) time.Duration {
	d := l.opts.Cooldown
	for i := 0; i < n && d < l.opts.MaxCooldown; i++ {
		d *= 2
	}
	d = min(d, l.opts.MaxCooldown)
	return d + rand.N(d/4+1)
}

// Health returns the link's health.
func (l *Link) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.healthLocked()
}

func (l *Link) healthLocked() Health {
	return Health{Connected: l.down == 0, NodesDown: l.down, Nodes: len(l.nodes), Since: l.since, LastError: l.last,
		Failures: l.failures, Reconnects: l.reconnects}
}

// Known returns the breaker of the node at addr in the current slot map,
// Whole for a link without one, or nil.
func (l *Link) Known(addr string) *Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.nodes) == 0 {
		return l.whole
	}
	return l.nodes[addr]
}

// Allow reports whether a call may go to the node: yes while its breaker
// is closed; while it is open, to one caller per Options.Trial (trial
// true: the call's result closes the breaker or keeps it open), and to
// no other (err, at once).
func (n *Node) Allow() (trial bool, err error) {
	if !n.open.Load() {
		return false, nil
	}
	if t := n.l.opts.Trial; t > 0 {
		now := time.Now().UnixNano()
		next := n.next.Load()
		if now >= next && n.next.CompareAndSwap(next, now+int64(t)) {
			return true, nil
		}
	}
	return false, n.Err()
}

// Open reports whether the node's breaker is open.
func (n *Node) Open() bool { return n.open.Load() }

// Err returns the error calls get while the breaker is open.
func (n *Node) Err() error {
	if e := n.err.Load(); e != nil {
		return *e
	}
	return n.l.opts.Unavailable
}

// setErrLocked sets the error calls get while the breaker is open.
func (n *Node) setErrLocked(err error) {
	where := ""
	if n.name != "" {
		where = " (node " + n.name + ")"
	}
	e := fmt.Errorf("%w%s: %s since %s; last error: %v", n.l.opts.Unavailable, where, n.reason, n.since.Format(time.RFC3339Nano), err)
	n.err.Store(&e)
}

// Fail records a failed call to the node (a batch of requests), or a
// failed connection attempt or probe (probe true, which does not count
// towards the threshold): at the threshold of consecutive failed calls,
// the breaker opens and the prober wakes.
func (n *Node) Fail(err error, probe bool) {
	l := n.l
	l.mu.Lock()
	l.failures++
	l.last = err
	n.clean.Store(false)
	if !probe {
		n.consecutive++
	}
	var h *Health
	switch {
	case n.gone:
	case n.open.Load():
		n.setErrLocked(err)
	case !probe && n.consecutive >= l.opts.Threshold:
		n.reason = fmt.Sprintf("breaker open after %d consecutive failures", n.consecutive)
		h = n.openLocked(err)
	}
	l.mu.Unlock()
	l.opened(h, true)
}

// StartDown opens the breaker of a store that could not connect at start,
// after err, and wakes the prober; OnHealth is not called (the store was
// never connected).
func (n *Node) StartDown(err error) {
	l := n.l
	l.mu.Lock()
	l.failures++
	l.last = err
	n.clean.Store(false)
	n.reason = "not connected"
	n.openLocked(err)
	l.mu.Unlock()
	l.opened(&Health{}, false)
}

// openLocked opens the breaker; the health to report when the link's
// Connected changed, else nil.
func (n *Node) openLocked(err error) *Health {
	l := n.l
	n.since = time.Now()
	n.setErrLocked(err)
	n.next.Store(n.since.UnixNano() + int64(l.opts.Trial))
	n.open.Store(true)
	l.down++
	if l.down != 1 {
		return nil
	}
	l.since = n.since
	h := l.healthLocked()
	return &h
}

// opened wakes the prober and reports h, when a breaker opened and the
// link's Connected changed (h not nil).
func (l *Link) opened(h *Health, report bool) {
	if h == nil {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	if report && l.opts.OnHealth != nil {
		l.opts.OnHealth(*h)
	}
}

// OK records a successful call or probe: the node answers, its breaker
// closes.
func (n *Node) OK() {
	if !n.open.Load() && n.clean.Load() {
		return // the fast path of every call while Redis is healthy
	}
	l := n.l
	l.mu.Lock()
	n.consecutive = 0
	n.clean.Store(true)
	var h *Health
	if n.open.Load() {
		l.reconnects++
		h = n.closeLocked()
	}
	l.mu.Unlock()
	if h != nil && l.opts.OnHealth != nil {
		l.opts.OnHealth(*h)
	}
}

// closeLocked closes the breaker; the health to report when the link's
// Connected changed, else nil.
func (n *Node) closeLocked() *Health {
	l := n.l
	n.open.Store(false)
	n.since = time.Now()
	l.down--
	if l.down != 0 {
		return nil
	}
	l.since = n.since
	h := l.healthLocked()
	return &h
}

// Slots is a Cluster's slot map as a store last read it: the node serving
// each slot, with its breaker.
type Slots struct {
	// Of is the index in Nodes of the node serving each slot, from 1 (0:
	// none).
	Of    [16384]uint16
	Nodes []*Node
}

// For returns the index (from 1; 0: not known) and the breaker of the
// node serving slot sl, Whole when the map does not name it.
func (l *Link) For(sl uint16) (uint16, *Node) {
	if m := l.slots.Load(); m != nil {
		if i := m.Of[sl]; i != 0 && int(i) <= len(m.Nodes) {
			return i, m.Nodes[i-1]
		}
	}
	return 0, l.whole
}

// Slots returns the slot map, nil before the first SetSlots.
func (l *Link) Slots() *Slots { return l.slots.Load() }

// SetSlots makes m the slot map, its nodes named addrs (m.Nodes is
// filled in): a node keeps its breaker from map to map, and a node that
// left the map (a primary that failed over) is forgotten, its breaker no
// longer counted down.
func (l *Link) SetSlots(m *Slots, addrs []string) {
	l.mu.Lock()
	nodes := make(map[string]*Node, len(addrs))
	m.Nodes = make([]*Node, len(addrs))
	for i, a := range addrs {
		n, ok := l.nodes[a]
		if !ok {
			n = l.newNode(a)
		}
		nodes[a], m.Nodes[i] = n, n
	}
	var h *Health
	for a, n := range l.nodes {
		if _, kept := nodes[a]; kept {
			continue
		}
		n.gone = true
		if n.open.Load() {
			if hh := n.closeLocked(); hh != nil {
				h = hh
			}
		}
	}
	l.nodes = nodes
	l.slots.Store(m)
	l.mu.Unlock()
	if h != nil && l.opts.OnHealth != nil {
		l.opts.OnHealth(*h)
	}
}
