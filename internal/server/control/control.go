package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
	"github.com/sluicehq/sluice/ratelimit"
)

// DefaultPoll is how often a shared Control looks for changes.
const DefaultPoll = time.Second

// Settings is a table of strings shared by a fleet, with a version that
// moves on every change: *redisstore.Store implements it.
type Settings interface {
	PutSetting(ctx context.Context, field, value string) error
	DeleteSettings(ctx context.Context, fields ...string) error
	SettingsVersion(ctx context.Context) (int64, error)
	Settings(ctx context.Context) (version int64, fields map[string]string, err error)
}

// Options configures a Control. The zero value is a good default: the
// state lives in the process.
type Options struct {
	// Settings, when set, shares the state with every process using the
	// same table.
	Settings Settings
	// Poll is how often a shared Control looks for changes; DefaultPoll
	// when zero.
	Poll time.Duration
	// Logger receives poll failures. Nil discards.
	Logger *slog.Logger
	// Now is the clock of expiries; nil means time.Now.
	Now func() time.Time
}

// Override is a limit that replaces a rule's for one identity until Until.
type Override struct {
	Rule     string          `json:"rule"`
	Who      string          `json:"who"` // the identity part of the store key (Who)
	Identity string          `json:"identity,omitempty"`
	Limit    ratelimit.Limit `json:"-"`
	Until    time.Time       `json:"until"`
	// Rate, Period and Burst are Limit in JSON.
	Rate   int64  `json:"rate"`
	Period string `json:"period"`
	Burst  int64  `json:"burst,omitempty"`
}

// Enforcement is a rule's percentage enforcement.
type Enforcement struct {
	Rule    string  `json:"rule"`
	Percent float64 `json:"percent"`
}

type ovKey struct{ rule, who string }

// table is one immutable state.
type table struct {
	overrides map[ovKey]Override
	percents  map[string]float64
}

func (t *table) empty() bool { return len(t.overrides) == 0 && len(t.percents) == 0 }

// Control holds the overrides and percentages. It is safe for concurrent
// use; Close stops its poller.
type Control struct {
	opts    Options
	cur     atomic.Pointer[table]
	mu      sync.Mutex // writes and loads
	version int64
	stop    chan struct{}
	done    chan struct{}
	closed  sync.Once
}

// New returns a Control; with opts.Settings it loads the shared state
// (a failure is logged, and the poller retries) and starts polling.
func New(ctx context.Context, opts Options) *Control {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Control{opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	c.cur.Store(&table{overrides: map[ovKey]Override{}, percents: map[string]float64{}})
	c.version = -1
	if opts.Settings == nil {
		close(c.done)
		return c
	}
	if err := c.Sync(ctx); err != nil {
		opts.Logger.Warn("control: shared admin state not loaded; retrying", "err", err)
	}
	go c.poll()
	return c
}

// Close stops the poller.
func (c *Control) Close() {
	c.closed.Do(func() { close(c.stop) })
	<-c.done
}

// Shared reports whether the state is shared through Settings.
func (c *Control) Shared() bool { return c.opts.Settings != nil }

func (c *Control) poll() {
	defer close(c.done)
	failing := false
	tick.Loop(c.stop, c.opts.Poll, func(time.Time) {
		ctx, cancel := context.WithTimeout(context.Background(), max(c.opts.Poll, time.Second))
		err := c.syncIfChanged(ctx)
		cancel()
		if err != nil && !failing {
			c.opts.Logger.Warn("control: cannot read the shared admin state; keeping the last one", "err", err)
		} else if err == nil && failing {
			c.opts.Logger.Info("control: shared admin state readable again")
		}
		failing = err != nil
	})
}

func (c *Control) syncIfChanged(ctx context.Context) error {
	v, err := c.opts.Settings.SettingsVersion(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	same := v == c.version
	c.mu.Unlock()
	if same {
		c.dropExpired(ctx)
		return nil
	}
	return c.Sync(ctx)
}

// Sync reloads the shared state now (a poll does it every Options.Poll).
// It does nothing for a Control of one process.
func (c *Control) Sync(ctx context.Context) error {
	if c.opts.Settings == nil {
		return nil
	}
	v, fields, err := c.opts.Settings.Settings(ctx)
	if err != nil {
		return err
	}
	t := &table{overrides: map[ovKey]Override{}, percents: map[string]float64{}}
	now := c.opts.Now()
	var expired []string
	for f, val := range fields {
		switch {
		case strings.HasPrefix(f, "o:"):
			o, err := decodeOverride(val)
			if err != nil {
				c.opts.Logger.Warn("control: bad shared override dropped", "field", f, "err", err)
				expired = append(expired, f)
				continue
			}
			if !now.Before(o.Until) {
				expired = append(expired, f)
				continue
			}
			t.overrides[ovKey{o.Rule, o.Who}] = o
		case strings.HasPrefix(f, "p:"):
			var e Enforcement
			if err := json.Unmarshal([]byte(val), &e); err != nil || e.Percent < 0 || e.Percent > 100 {
				c.opts.Logger.Warn("control: bad shared enforcement dropped", "field", f, "value", val)
				expired = append(expired, f)
				continue
			}
			t.percents[e.Rule] = e.Percent
		}
	}
	c.mu.Lock()
	c.version = v
	c.cur.Store(t)
	c.mu.Unlock()
	if len(expired) > 0 {
		c.opts.Settings.DeleteSettings(ctx, expired...)
	}
	return nil
}

// dropExpired removes expired overrides from the table in use (and, when
// shared, from the settings).
func (c *Control) dropExpired(ctx context.Context) {
	c.mu.Lock()
	t := c.cur.Load()
	now := c.opts.Now()
	var gone []ovKey
	for k, o := range t.overrides {
		if !now.Before(o.Until) {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		c.mu.Unlock()
		return
	}
	nt := t.clone()
	var fields []string
	for _, k := range gone {
		delete(nt.overrides, k)
		fields = append(fields, overrideField(k.rule, k.who))
	}
	c.cur.Store(nt)
	c.mu.Unlock()
	if c.opts.Settings != nil {
		c.opts.Settings.DeleteSettings(ctx, fields...)
	}
}

func (t *table) clone() *table {
	nt := &table{overrides: make(map[ovKey]Override, len(t.overrides)), percents: make(map[string]float64, len(t.percents))}
	for k, v := range t.overrides {
		nt.overrides[k] = v
	}
	for k, v := range t.percents {
		nt.percents[k] = v
	}
	return nt
}

// update applies f to a copy of the state and makes it current; with
// Settings, write (the shared change) runs first and a failure leaves the
// state as it was.
func (c *Control) update(ctx context.Context, write func(Settings) error, f func(*table)) error {
	if s := c.opts.Settings; s != nil {
		if err := write(s); err != nil {
			return err
		}
	}
	c.mu.Lock()
	nt := c.cur.Load().clone()
	f(nt)
	c.cur.Store(nt)
	c.mu.Unlock()
	return nil
}

// Who returns the identity part of a store key: what follows its third
// ':' (the domain and descriptor entries of a sluice key), or the whole
// key when it has fewer.
func Who(key string) string {
	rest := key
	for range 3 {
		i := strings.IndexByte(rest, ':')
		if i < 0 {
			return key
		}
		rest = rest[i+1:]
	}
	return rest
}

func overrideField(rule, who string) string {
	h := sha256.Sum256([]byte(rule + "\x00" + who))
	return "o:" + hex.EncodeToString(h[:16])
}

func percentField(rule string) string {
	h := sha256.Sum256([]byte(rule))
	return "p:" + hex.EncodeToString(h[:16])
}

func encodeOverride(o Override) string {
	o.Rate, o.Period, o.Burst = o.Limit.Rate, o.Limit.Period.String(), o.Limit.Burst
	b, _ := json.Marshal(o)
	return string(b)
}

func decodeOverride(s string) (Override, error) {
	var o Override
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, err
	}
	p, err := time.ParseDuration(o.Period)
	if err != nil {
		return o, err
	}
	o.Limit = ratelimit.Limit{Rate: o.Rate, Period: p, Burst: o.Burst}
	if err := o.Limit.Validate(); err != nil {
		return o, err
	}
	if o.Rule == "" || o.Who == "" {
		return o, errors.New("override without rule or identity")
	}
	return o, nil
}

// SetOverride gives o.Who o.Limit on o.Rule until o.Until.
func (c *Control) SetOverride(ctx context.Context, o Override) error {
	if err := o.Limit.Validate(); err != nil {
		return err
	}
	if !c.opts.Now().Before(o.Until) {
		return errors.New("control: the override expires before it starts")
	}
	o.Rate, o.Period, o.Burst = o.Limit.Rate, o.Limit.Period.String(), o.Limit.Burst
	return c.update(ctx, func(s Settings) error {
		return s.PutSetting(ctx, overrideField(o.Rule, o.Who), encodeOverride(o))
	}, func(t *table) { t.overrides[ovKey{o.Rule, o.Who}] = o })
}

// DeleteOverride removes who's override on rule; it reports whether there
// was one.
func (c *Control) DeleteOverride(ctx context.Context, rule, who string) (bool, error) {
	_, had := c.cur.Load().overrides[ovKey{rule, who}]
	err := c.update(ctx, func(s Settings) error {
		return s.DeleteSettings(ctx, overrideField(rule, who))
	}, func(t *table) { delete(t.overrides, ovKey{rule, who}) })
	return had, err
}

// SetEnforce enforces rule on percent % of identities (0 to 100) and
// shadows it for the others, whatever the rule's shadow_mode says.
func (c *Control) SetEnforce(ctx context.Context, rule string, percent float64) error {
	if !(percent >= 0 && percent <= 100) {
		return fmt.Errorf("control: percent %v is not within 0..100", percent)
	}
	b, _ := json.Marshal(Enforcement{Rule: rule, Percent: percent})
	return c.update(ctx, func(s Settings) error {
		return s.PutSetting(ctx, percentField(rule), string(b))
	}, func(t *table) { t.percents[rule] = percent })
}

// DeleteEnforce puts rule back to what its config says.
func (c *Control) DeleteEnforce(ctx context.Context, rule string) error {
	return c.update(ctx, func(s Settings) error {
		return s.DeleteSettings(ctx, percentField(rule))
	}, func(t *table) { delete(t.percents, rule) })
}

// Overrides lists the overrides in force, by rule and identity.
func (c *Control) Overrides() []Override {
	now := c.opts.Now()
	var out []Override
	for _, o := range c.cur.Load().overrides {
		if now.Before(o.Until) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Who < out[j].Who
	})
	return out
}

// Enforcements lists the percentage enforcements, by rule.
func (c *Control) Enforcements() []Enforcement {
	var out []Enforcement
	for r, p := range c.cur.Load().percents {
		out = append(out, Enforcement{Rule: r, Percent: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return out
}

// Percent returns rule's enforcement percentage, if one is set.
func (c *Control) Percent(rule string) (float64, bool) {
	p, ok := c.cur.Load().percents[rule]
	return p, ok
}

// Override returns who's override on rule, if one is in force.
func (c *Control) Override(rule, who string) (Override, bool) {
	o, ok := c.cur.Load().overrides[ovKey{rule, who}]
	if ok && !c.opts.Now().Before(o.Until) {
		return Override{}, false
	}
	return o, ok
}

// Adjust applies the state to one check of rule for the store key key:
// an override in force replaces *limit, and a percentage enforcement sets
// *shadow (enforced for the identities Enforced picks). It reports whether
// an override applied. It is the hot path: one atomic load when nothing
// is set.
func (c *Control) Adjust(rule, key string, limit *ratelimit.Limit, shadow *bool) (overridden bool) {
	t := c.cur.Load()
	if t.empty() {
		return false
	}
	who := Who(key)
	if o, ok := t.overrides[ovKey{rule, who}]; ok && c.opts.Now().Before(o.Until) {
		*limit = o.Limit
		overridden = true
	}
	if p, ok := t.percents[rule]; ok {
		*shadow = !Enforced(rule, who, p)
	}
	return overridden
}

// Enforced reports whether percentage enforcement at percent enforces rule
// on the identity who: a stable hash of both (FNV-1a) picks the
// identity's place in 0..9999, enforced below percent·100. Every process
// picks the same identities.
func Enforced(rule, who string, percent float64) bool {
	if percent >= 100 {
		return true
	}
	if percent <= 0 {
		return false
	}
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(rule); i++ {
		h = (h ^ uint64(rule[i])) * prime
	}
	h *= prime // the 0 separator
	for i := 0; i < len(who); i++ {
		h = (h ^ uint64(who[i])) * prime
	}
	return float64(h%10000) < percent*100
}
