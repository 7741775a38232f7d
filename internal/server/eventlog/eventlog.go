package eventlog

import (
	"cmp"
	"context"
	"errors"
	"github.com/sluicehq/sluice/internal/tick"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Kind is what happened.
type Kind uint8

const (
	// StoreError is a store failure: logged at slog.LevelError as "store
	// failed".
	StoreError Kind = iota
	// ShadowDenied is a request over a shadow_mode rule's limit, let
	// through: logged at slog.LevelInfo as "over limit in shadow mode".
	ShadowDenied
	// Denied is a request refused by a rule: logged at slog.LevelInfo as
	// "over limit".
	Denied
	// Unauthorized is a request whose credential was refused (401): logged
	// at slog.LevelWarn as "credential refused", its rule the reason
	// (identity.Reason) and its keys the callers' addresses, never the
	// credential.
	Unauthorized
	// UpstreamError is a request the gateway's upstream did not answer:
	// logged at slog.LevelWarn as "upstream failed", the rule being the
	// upstream and the key the request's path.
	UpstreamError
	// ServerError is a line of net/http's server log (a failed TLS
	// handshake, above all, which a client makes at the rate it opens
	// connections): logged at slog.LevelWarn as "server error", the rule
	// being the listener (ErrorLog).
	ServerError

	numKinds
)

var kinds = [numKinds]struct {
	name, msg string
	level     slog.Level
}{
	StoreError:    {"store_error", "store failed", slog.LevelError},
	ShadowDenied:  {"shadow_denied", "over limit in shadow mode", slog.LevelInfo},
	Denied:        {"denied", "over limit", slog.LevelInfo},
	Unauthorized:  {"unauthorized", "credential refused", slog.LevelWarn},
	UpstreamError: {"upstream_error", "upstream failed", slog.LevelWarn},
	ServerError:   {"server_error", "server error", slog.LevelWarn},
}

// String returns the kind's name in logs: store_error, shadow_denied,
// denied, unauthorized, upstream_error or server_error.
func (k Kind) String() string {
	if k >= numKinds {
		return "unknown"
	}
	return kinds[k].name
}

// dead marks an entry's count once the entry is dropped.
const dead = 1 << 62

// Defaults of Options' zero values, and the bound on kept strings.
const (
	DefaultInterval = 10 * time.Second
	DefaultSamples  = 3
	DefaultMaxRules = 1000
	// MaxKeyLen is the most bytes of a rule name, sample key or other
	// client-controlled value kept in a line; a longer one is cut at a
	// UTF-8 boundary and ends with CutMarker (Cut).
	MaxKeyLen = 256
	// MaxErrLen is the most bytes of an error's text kept in a line,
	// cut as MaxKeyLen.
	MaxErrLen = 1024
	// CutMarker ends a value that was cut.
	CutMarker = "...[cut]"
)

// Options configures a Log. The zero value is the documented default.
type Options struct {
	// Interval is how often a (kind, rule) with events gets its summary
	// line. Zero or less means DefaultInterval.
	Interval time.Duration
	// Samples is how many distinct keys a line names at most. Zero means
	// DefaultSamples; negative, none.
	Samples int
	// MaxRules bounds the (kind, rule) pairs tracked at once; events of
	// further pairs are counted in one overflow line per kind. Zero or
	// less means DefaultMaxRules.
	MaxRules int
	// SummaryOnly holds back the first event of a quiet (kind, rule) for
	// the interval's summary too, instead of logging it at once.
	SummaryOnly bool
}

// Log aggregates events into a bounded number of log lines. Create it with
// New and stop it with Close. Its methods are safe for concurrent use.
type Log struct {
	logger      *slog.Logger
	interval    time.Duration
	samples     int // keys per line
	window      int64
	maxRules    int
	summaryOnly bool

	table atomic.Pointer[table] // read by Report without locks

	_ [64]byte // keep the counters below off the lines Report reads

	mu       sync.Mutex // writes of table; flushes
	closed   atomic.Bool
	overflow [numKinds]atomic.Int64
	stop     chan struct{}
	done     chan struct{}
}

// table maps each kind's rule names to their entries. It is never
// modified once published: a new pair copies it.
type table struct {
	byKind [numKinds]map[string]*entry
	n      int
}

// entry is one (kind, rule) pair's events since the last line.
type entry struct {
	// count is the events not yet logged, plus dead once the entry is
	// dropped: a report that adds to a dead entry (it loaded the table
	// before the flush replaced it) counts again in the current table.
	count atomic.Int64
	_     [56]byte // count's cache line is written by every report

	kind  Kind
	rule  string // the table's key: the rule cut to MaxKeyLen
	label string // the rule in lines: rule, with CutMarker when cut

	mu    sync.Mutex
	keys  []string // distinct sample keys, at most Log.samples
	err   error    // last error
	fresh bool     // created since the last flush (its first event logged)
}

// New returns a Log writing to logger (nil discards) and starts the
// goroutine that writes its summaries every opts.Interval. Call Close to
// stop it.
func New(logger *slog.Logger, opts Options) *Log {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		logger:      logger,
		interval:    cmp.Or(opts.Interval, DefaultInterval),
		samples:     max(0, cmp.Or(opts.Samples, DefaultSamples)),
		maxRules:    cmp.Or(max(0, opts.MaxRules), DefaultMaxRules),
		summaryOnly: opts.SummaryOnly,
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	if l.interval < 0 {
		l.interval = DefaultInterval
	}
	// Reports past the samples still look for a distinct key a little
	// while, then take no lock: one hot key must not make every report
	// lock.
	l.window = int64(4 * l.samples)
	l.table.Store(&table{})
	go l.run()
	return l
}

func (l *Log) run() {
	defer close(l.done)
	tick.Loop(l.stop, l.interval, func(time.Time) { l.Flush() })
}

// Report records one event of kind for rule, about key (a request's
// limiting key or path: it may be sampled into the line, cut by Cut; an
// empty one is not), with err the failure if any (the line shows the last
// one). A pair's first event after an interval without any is logged at
// once unless Options.SummaryOnly; the others are counted into one line
// per interval. Each event is in exactly one line. Reports after Close
// are dropped.
//
// In the steady state (the pair already tracked and its samples taken)
// Report takes no lock and does not allocate.
func (l *Log) Report(kind Kind, rule, key string, err error) {
	if kind >= numKinds {
		return
	}
	r := Prefix(rule, MaxKeyLen)
	e := l.table.Load().byKind[kind][r]
	if e == nil || !l.count(e, key, err) {
		l.first(kind, r, len(r) < len(rule), key, err)
	}
}

// count adds an event to e, unless e is dead.
func (l *Log) count(e *entry, key string, err error) (ok bool) {
	n := e.count.Add(1)
	switch {
	case n >= dead:
		return false
	case n <= l.window:
		e.mu.Lock()
		e.sample(l.samples, key)
		if err != nil {
			e.err = err
		}
		e.mu.Unlock()
	case err != nil:
		// The last error, or one as recent: skip when another report or
		// the flush holds the entry.
		if e.mu.TryLock() {
			e.err = err
			e.mu.Unlock()
		}
	}
	return true
}

// sample adds key to e's samples if it is new and there is room. e.mu is
// held.
func (e *entry) sample(samples int, key string) {
	if len(e.keys) >= samples || key == "" {
		return
	}
	key = Cut(key)
	if slices.Contains(e.keys, key) {
		return
	}
	e.keys = append(e.keys, strings.Clone(key))
}

// first handles an event of a pair without an entry: it creates one (or
// counts the event as overflow), and logs the event.
func (l *Log) first(kind Kind, rule string, cut bool, key string, err error) {
	if l.closed.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return
	}
	t := l.table.Load()
	if e := t.byKind[kind][rule]; e != nil { // created meanwhile
		l.count(e, key, err)
		return
	}
	if t.n >= l.maxRules {
		l.overflow[kind].Add(1)
		return
	}
	e := &entry{kind: kind, rule: strings.Clone(rule), label: strings.Clone(rule), fresh: true}
	if cut {
		e.label += CutMarker
	}
	e.keys = make([]string, 0, l.samples)
	nt := &table{n: t.n + 1}
	for k := range t.byKind {
		nt.byKind[k] = t.byKind[k]
	}
	m := make(map[string]*entry, len(t.byKind[kind])+1)
	for r, e := range t.byKind[kind] {
		m[r] = e
	}
	m[e.rule] = e
	nt.byKind[kind] = m
	l.table.Store(nt)
	if l.summaryOnly {
		l.count(e, key, err)
		return
	}
	// Under l.mu, so that the pair's summary never comes before it.
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("kind", kind.String()), slog.String("rule", e.label), slog.Int64("count", 1))
	if l.samples > 0 && key != "" {
		attrs = append(attrs, slog.Any("keys", []string{Cut(key)}))
	}
	if err != nil {
		attrs = append(attrs, errAttr(err))
	}
	attrs = append(attrs, slog.Bool("first", true))
	l.logger.LogAttrs(context.Background(), kinds[kind].level, kinds[kind].msg, attrs...)
}

// line is one summary to log.
type line struct {
	kind     Kind
	rule     string
	count    int64
	keys     []string
	err      error
	overflow bool
}

// Flush logs the summaries of the events counted so far, as the interval's
// end does.
func (l *Log) Flush() {
	l.mu.Lock()
	lines := l.collect(false)
	l.mu.Unlock()
	l.write(lines)
}

// collect takes the counted events out of the entries, into lines, and
// drops the entries of quiet pairs (or all, when final). l.mu is held.
func (l *Log) collect(final bool) []line {
	var lines []line
	take := func(e *entry) (keep bool) {
		e.mu.Lock()
		keep = !final && (e.fresh || e.count.Load() > 0)
		var n int64
		if keep {
			n = e.count.Swap(0)
		} else {
			n = e.count.Swap(dead) // later reports go to a new entry
		}
		keys, err := e.keys, e.err
		if n > 0 {
			e.keys, e.err = make([]string, 0, l.samples), nil
		}
		e.fresh = false
		e.mu.Unlock()
		if n > 0 {
			lines = append(lines, line{kind: e.kind, rule: e.label, count: n, keys: keys, err: err})
		}
		return keep
	}
	t := l.table.Load()
	nt := &table{}
	for k := range t.byKind {
		for _, e := range t.byKind[k] {
			if take(e) {
				if nt.byKind[k] == nil {
					nt.byKind[k] = make(map[string]*entry)
				}
				nt.byKind[k][e.rule] = e
				nt.n++
			}
		}
	}
	if nt.n != t.n {
		l.table.Store(nt)
	}
	for k := range l.overflow {
		if n := l.overflow[k].Swap(0); n > 0 {
			lines = append(lines, line{kind: Kind(k), count: n, overflow: true})
		}
	}
	return lines
}

// write logs lines, in the order of kinds and rules.
func (l *Log) write(lines []line) {
	slices.SortFunc(lines, func(a, b line) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.rule, b.rule), cmp.Compare(b.count, a.count))
	})
	ctx := context.Background()
	for _, ln := range lines {
		k := kinds[ln.kind]
		attrs := make([]slog.Attr, 0, 6)
		attrs = append(attrs, slog.String("kind", k.name))
		if ln.overflow {
			attrs = append(attrs, slog.Bool("overflow", true))
		} else {
			attrs = append(attrs, slog.String("rule", ln.rule))
		}
		attrs = append(attrs, slog.Int64("count", ln.count))
		if len(ln.keys) > 0 {
			attrs = append(attrs, slog.Any("keys", ln.keys))
		}
		if ln.err != nil {
			attrs = append(attrs, errAttr(ln.err))
		}
		attrs = append(attrs, slog.Duration("interval", l.interval))
		l.logger.LogAttrs(ctx, k.level, k.msg, attrs...)
	}
}

// Close stops the Log's goroutine and logs what was counted since the last
// summary. Reports racing with Close may be lost; later ones are dropped.
// It always returns nil, and does nothing more when called again.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Swap(true) {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	lines := l.collect(true)
	l.table.Store(&table{})
	l.mu.Unlock()
	l.write(lines)
	return nil
}

// ErrorLog returns a logger for http.Server.ErrorLog whose every line is
// a ServerError event of listener (the rule): net/http's lines, one per
// failed TLS handshake say, are counted into one line an interval.
func (l *Log) ErrorLog(listener string) *log.Logger {
	return log.New(serverLines{l, listener}, "", 0)
}

type serverLines struct {
	l        *Log
	listener string
}

func (w serverLines) Write(p []byte) (int, error) {
	w.l.Report(ServerError, w.listener, "", errors.New(strings.TrimSpace(string(p))))
	return len(p), nil
}

// Cut bounds a client-controlled value (a path, a header value, a key)
// for a log line: s itself when it has at most MaxKeyLen bytes, else its
// first MaxKeyLen bytes or fewer (cut at a UTF-8 boundary) followed by
// CutMarker, so at most MaxKeyLen+len(CutMarker) bytes. A short s costs
// nothing; a long one, one allocation.
func Cut(s string) string { return cutN(s, MaxKeyLen) }

func cutN(s string, n int) string {
	if t := Prefix(s, n); len(t) < len(s) {
		return t + CutMarker
	}
	return s
}

// errAttr is err's text for a line, cut to MaxErrLen.
func errAttr(err error) slog.Attr { return slog.String("error", cutN(err.Error(), MaxErrLen)) }

// Prefix is the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence: a client-controlled value cut to a bound without
// a marker (metric labels; Cut marks what it cut).
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	return s[:i]
}
