package status

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/server/topk"
)

// Outcome is what a rule decided for one request.
type Outcome uint8

const (
	Allowed Outcome = iota
	Denied
	ShadowDenied
	StoreError
	numOutcomes
)

// Defaults of Options.
const (
	DefaultMinutes  = 15
	DefaultCapacity = 128
	DefaultTop      = 10
)

// Options configures a Recorder. The zero value is a good default.
type Options struct {
	// Minutes is the length of each rule's ring of per-minute counters
	// (DefaultMinutes).
	Minutes int
	// Capacity is the number of counters of each top-K summary
	// (DefaultCapacity).
	Capacity int
	// Top is how many keys of each summary a Page shows (DefaultTop).
	Top int
	// Now is the clock; nil means time.Now, which Record (once per
	// decision) reads through a coarse clock: a decision can be counted
	// in the previous minute up to CoarseResolution (plus the scheduling
	// delay of the clock's goroutine) after that minute ended.
	Now func() time.Time
}

// RuleInfo describes a rule as a Page shows it.
type RuleInfo struct {
	ID        string `json:"id"` // what the server (and the admin API) names the rule by
	Name      string `json:"name"`
	Domain    string `json:"domain"`
	Limit     string `json:"limit"`     // "5/1m0s burst 10", "1000/month"
	Algorithm string `json:"algorithm"` // gcra, token_bucket, …, quota, unlimited
	Quota     int64  `json:"quota"`     // the IETF policy's q
	Window    int64  `json:"window"`    // and w, in seconds
	Shadow    bool   `json:"shadow"`    // shadow_mode, or the server's global shadow
}

// Recorder keeps the per-rule counters and top-K summaries. It is safe
// for concurrent use.
type Recorder struct {
	opts   Options
	coarse *coarseClock // Record's clock when opts.Now is nil
	mu     sync.Mutex   // SetRules
	rules  atomic.Pointer[map[string]*Rule]
	order  atomic.Pointer[[]*Rule]
}

// Rule is one rule's counters and summaries.
type Rule struct {
	info    atomic.Pointer[RuleInfo]
	now     func() time.Time
	coarse  *coarseClock // nil: Record reads now
	ring    []slot
	rotate  sync.Mutex
	denied  *topk.TopK
	shadow  *topk.TopK
	minutes int
}

type slot struct {
	minute atomic.Int64 // Unix minute this slot counts; 0 unused
	c      [numOutcomes]atomic.Uint64
}

// NewRecorder returns a Recorder with no rules.
func NewRecorder(opts Options) *Recorder {
	if opts.Minutes <= 0 {
		opts.Minutes = DefaultMinutes
	}
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultCapacity
	}
	if opts.Top <= 0 {
		opts.Top = DefaultTop
	}
	r := &Recorder{opts: opts}
	if opts.Now == nil {
		r.opts.Now, r.coarse = time.Now, &coarseClock{}
	}
	m := map[string]*Rule{}
	r.rules.Store(&m)
	r.order.Store(&[]*Rule{})
	return r
}

// SetRules makes infos the recorded rules, in that order. A rule whose ID
// was recorded before keeps its counters (a reload does not blank the
// page); the others are dropped.
func (r *Recorder) SetRules(infos []RuleInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.rules.Load()
	m := make(map[string]*Rule, len(infos))
	order := make([]*Rule, 0, len(infos))
	for _, in := range infos {
		if m[in.ID] != nil {
			continue
		}
		rl := old[in.ID]
		if rl == nil {
			rl = &Rule{now: r.opts.Now, coarse: r.coarse, ring: make([]slot, r.opts.Minutes), minutes: r.opts.Minutes,
				denied: topk.New(topk.Options{Capacity: r.opts.Capacity, Now: r.opts.Now}),
				shadow: topk.New(topk.Options{Capacity: r.opts.Capacity, Now: r.opts.Now})}
		}
		rl.info.Store(&in)
		m[in.ID] = rl
		order = append(order, rl)
	}
	r.rules.Store(&m)
	r.order.Store(&order)
}

// Rule returns the rule recorded under id, or nil.
func (r *Recorder) Rule(id string) *Rule { return (*r.rules.Load())[id] }

// Rules returns the recorded rules in order.
func (r *Recorder) Rules() []*Rule { return *r.order.Load() }

// Info returns the rule's description.
func (rl *Rule) Info() RuleInfo { return *rl.info.Load() }

// Record counts one decision; key is who was decided (the store key), read
// only for denials and shadow denials.
func (rl *Rule) Record(o Outcome, key string) {
	if rl == nil || o >= numOutcomes {
		return
	}
	var min int64
	if rl.coarse != nil {
		min = rl.coarse.unix() / 60
	} else {
		min = rl.now().Unix() / 60
	}
	s := &rl.ring[min%int64(len(rl.ring))]
	if s.minute.Load() != min {
		rl.rotate.Lock()
		if s.minute.Load() != min {
			for i := range s.c {
				s.c[i].Store(0)
			}
			s.minute.Store(min)
		}
		rl.rotate.Unlock()
	}
	s.c[o].Add(1)
	switch o {
	case Denied:
		rl.denied.RecordAt(key, rl.now())
	case ShadowDenied:
		rl.shadow.RecordAt(key, rl.now())
	}
}

// CoarseResolution is the period of Record's coarse clock.
const CoarseResolution = time.Second

// coarseClock is the Unix time in seconds, read from memory: a timer
// (time.AfterFunc, no goroutine between ticks) stores it every
// CoarseResolution while Record is being called, and is not re-armed
// after a tick with no call, so an idle or dropped Recorder costs
// nothing; the next call starts it again.
type coarseClock struct {
	sec     atomic.Int64
	used    atomic.Bool // a read since the last tick
	running atomic.Bool
}

func (c *coarseClock) unix() int64 {
	if !c.running.Load() {
		now := time.Now().Unix()
		if c.running.CompareAndSwap(false, true) {
			c.sec.Store(now)
			c.used.Store(true)
			time.AfterFunc(CoarseResolution, c.tick)
		}
		return now
	}
	if !c.used.Load() { // one write a tick, not one a call
		c.used.Store(true)
	}
	return c.sec.Load()
}

func (c *coarseClock) tick() {
	if !c.used.Swap(false) {
		c.running.Store(false)
		return
	}
	c.sec.Store(time.Now().Unix())
	time.AfterFunc(CoarseResolution, c.tick)
}

// Minute is one minute's decisions of one rule.
type Minute struct {
	Start        time.Time `json:"start"`
	Allowed      uint64    `json:"allowed"`
	Denied       uint64    `json:"denied"`
	ShadowDenied uint64    `json:"shadow_denied"`
	StoreErrors  uint64    `json:"store_errors"`
}

// minutes returns the ring's last n minutes, oldest first, the current
// one last.
func (rl *Rule) lastMinutes(now time.Time) []Minute {
	cur := now.Unix() / 60
	out := make([]Minute, 0, rl.minutes)
	for m := cur - int64(rl.minutes) + 1; m <= cur; m++ {
		s := &rl.ring[((m%int64(len(rl.ring)))+int64(len(rl.ring)))%int64(len(rl.ring))]
		mi := Minute{Start: time.Unix(m*60, 0).UTC()}
		if s.minute.Load() == m {
			mi.Allowed, mi.Denied = s.c[Allowed].Load(), s.c[Denied].Load()
			mi.ShadowDenied, mi.StoreErrors = s.c[ShadowDenied].Load(), s.c[StoreError].Load()
		}
		out = append(out, mi)
	}
	return out
}

// Label turns a store key into who it is about, for people: the
// descriptor entries of "sl:<algorithm>:<period>:<domain>_<k>_<v>_…" as
// "k=v, k2=v2" (sluice's key form, rules.Rule.AppendKey); any other key is
// returned as it is.
func Label(key string) string {
	_, kv, ok := Entries(key)
	if !ok {
		return key
	}
	var b strings.Builder
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(kv[i+1])
	}
	return b.String()
}

// Entries parses a sluice store key into its domain and its descriptor
// entries, keys and values alternating, unescaped. ok is false for a key
// of another form.
func Entries(key string) (domain string, kv []string, ok bool) {
	rest := key
	if !strings.HasPrefix(rest, "sl:") {
		return "", nil, false
	}
	// Three colons: "sl:", the algorithm (or "quota"), the period.
	for range 3 {
		i := strings.IndexByte(rest, ':')
		if i < 0 {
			return "", nil, false
		}
		rest = rest[i+1:]
	}
	parts := strings.Split(rest, "_")
	if len(parts) < 4 || parts[len(parts)-1] != "" || len(parts)%2 != 0 {
		return "", nil, false
	}
	for i, p := range parts[:len(parts)-1] {
		parts[i] = unescape(p)
	}
	return parts[0], parts[1 : len(parts)-1], true
}

// unescape undoes the key's percent-encoding of '%' and '_'.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	return strings.NewReplacer("%5F", "_", "%25", "%").Replace(s)
}
