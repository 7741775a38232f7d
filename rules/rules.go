package rules

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Entry is one key/value of a descriptor, as Envoy sends it
// (("remote_address", "10.0.0.1")).
type Entry struct{ Key, Value string }

// Rule is what a descriptor matched: a rate limit, an unlimited marker or a
// calendar quota. It is a leaf (or an inner node with a rate_limit) of the
// descriptor tree.
//
// A Rule is exactly one of three kinds:
//   - Unlimited: the descriptor is known and never limited (Limit is zero);
//   - a quota: Quota is non-nil and Limit is zero;
//   - a rate limit: Limit and Algorithm are set.
//
// Rules belong to their Config and must not be modified.
type Rule struct {
	// Name is rate_limit.name, or the Key when the file names none. Names
	// are what replaces refers to.
	Name string
	// Domain is the domain of the file the rule comes from.
	Domain string
	// Key is the full path of the rule in the descriptor tree, as
	// envoyproxy/ratelimit builds it for its stats: "domain.key_value.key2"
	// (key alone where the descriptor has no value). It is unique within a
	// domain.
	Key string
	// Limit is the rate limit: requests_per_unit per unit, or per window;
	// Burst from burst (0: Rate). It is zero for Unlimited and quota rules.
	Limit ratelimit.Limit
	// Algorithm is the algorithm the file names, or FixedWindow when it
	// names none (envoyproxy/ratelimit's semantics: fixed windows aligned to
	// the unit).
	Algorithm ratelimit.Algorithm
	// Unit is the rate_limit.unit the file names, in lower case ("second",
	// "minute", "hour", "day", "week", "month" or "year"), or "" for a
	// sluice window, a quota or an unlimited rule.
	Unit string
	// UnitMultiplier is envoyproxy/ratelimit's rate_limit.unit_multiplier,
	// the number of units in the period (Limit.Period is Unit times it), as
	// the file gives it; 0 when the file gives none (one unit).
	UnitMultiplier uint32
	// Unlimited rules are never limited (rate_limit.unlimited: true).
	Unlimited bool
	// ShadowMode rules are counted and reported but never deny.
	ShadowMode bool
	// DetailedMetric asks for metrics per request value (detailed_metric).
	DetailedMetric bool
	// QuotaMode is envoyproxy/ratelimit's quota_mode: the rule never
	// denies; an exceeded limit is reported to the caller instead (the RLS
	// reports it in dynamic metadata). Not to be confused with Quota.
	QuotaMode bool
	// Replaces names the rules this one replaces when both match one
	// request (rate_limit.replaces).
	Replaces []string
	// Metadata is the descriptor's metadata mapping, as the file gives it
	// (nil when it gives none). It decides nothing: envoyproxy/ratelimit
	// merges the metadata of the rules a request matched into the
	// response's dynamic metadata. Do not modify it.
	Metadata map[string]any
	// Quota is non-nil for a calendar quota rule.
	Quota *Quota
	// Prefetch asks for prefetch mode (rate_limit.prefetch: true; lease:
	// true is its deprecated spelling): through a Set bound with
	// BindOptions.Prefetch, the rule's requests go to that store (the
	// prefetch view of Redis, redisstore.Prefetch), which decides a hot key
	// locally from slices of its budget taken ahead; other rules stay
	// exact. Only rules whose algorithm is Prefetchable (gcra, token_bucket,
	// fixed_window) may have it.
	Prefetch bool
	// File and Line tell where the rule was defined (the descriptor's key).
	File string
	Line int

	explicitName bool
	seq          int    // the rule's index in its Config's rules (Set.Bind)
	path         []step // one per level, root first
	keyPrefix    string // the store key up to the entries (AppendKey), for a rate limit
}

// step is what the matcher needs to know about one level of a rule's path
// to build storage and metric keys.
type step struct {
	key           string
	value         string   // "" for a key-only descriptor; the pattern with '*' for a wildcard
	local         string   // the composite key within its level: key_value, or key
	parts         []string // local split on '*', for wildcards
	wildcard      bool     // local has a '*'
	shareThresh   bool
	valueToMetric bool
}

// How an entry reached the descriptor of its level (see Config.Match).
const (
	viaKey      = iota // the descriptor's composite key is the entry's key alone
	viaExact           // the descriptor's composite key is the entry's key_value
	viaWildcard        // the descriptor's pattern matched the entry's key_value
)

// via tells how e reached s; e is one entry that matched s's level.
func (s *step) via(e Entry) int {
	switch {
	case len(s.local) == len(e.Key)+1+len(e.Value) && strings.HasPrefix(s.local, e.Key) &&
		s.local[len(e.Key)] == '_' && strings.HasSuffix(s.local, e.Value):
		return viaExact
	case s.wildcard && globMatch(s.parts, e.Key+"_"+e.Value):
		return viaWildcard
	}
	return viaKey
}

// pattern is upstream's value for a wildcard matched by an entry of key k:
// the composite key without its "k_" prefix.
func (s *step) pattern(k string) string {
	if len(s.local) > len(k) && s.local[len(k)] == '_' && strings.HasPrefix(s.local, k) {
		return s.local[len(k)+1:]
	}
	return s.local
}

// HasName reports whether the file gave the rule a name (rate_limit.name),
// rather than Name being derived from Key.
func (r *Rule) HasName() bool { return r.explicitName }

// MetricKey returns the key envoyproxy/ratelimit counts entries under in
// its stats (src/config/config_impl.go, GetLimit): Key, unless the rule has
// detailed_metric (the request's own key_value pairs; values matched by a
// share_threshold wildcard keep its pattern) or a level has value_to_metric
// (the request's value at that level), or an entry reached a wildcard of
// another key (possible when keys contain '_'). Entries must be those that
// matched r. It does not allocate when it returns Key.
func (r *Rule) MetricKey(entries []Entry) string {
	if !r.DetailedMetric {
		plain := true
		for i := range r.path {
			s := &r.path[i]
			if s.valueToMetric || (s.wildcard && (i >= len(entries) || entries[i].Key != s.key)) {
				plain = false
				break
			}
		}
		if plain {
			return r.Key
		}
	}
	at := func(i int) *step {
		if i < len(r.path) {
			return &r.path[i]
		}
		return &step{}
	}
	shared := false
	for i, e := range entries {
		if s := at(i); s.shareThresh && s.via(e) == viaWildcard {
			shared = true
		}
	}
	var b strings.Builder
	b.WriteString(r.Domain)
	for i, e := range entries {
		s := at(i)
		b.WriteByte('.')
		b.WriteString(e.Key)
		var v string
		switch how := s.via(e); {
		case r.DetailedMetric && !shared:
			b.WriteByte('_') // envoyproxy/ratelimit writes key_value even for an empty value
			v = e.Value
		case r.DetailedMetric:
			v = e.Value
			if how == viaWildcard && s.shareThresh {
				v = s.pattern(e.Key)
			}
		case how == viaWildcard && s.shareThresh:
			v = s.pattern(e.Key)
		case how == viaWildcard && s.valueToMetric:
			v = e.Value
		case how == viaWildcard:
			v = s.pattern(e.Key)
		case how == viaExact || s.valueToMetric:
			v = e.Value
		}
		if v != "" {
			if !(r.DetailedMetric && !shared) {
				b.WriteByte('_')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}

// String formats r for logs: "domain.key: 10/1m0s fixed_window".
func (r *Rule) String() string {
	switch {
	case r == nil:
		return "<no rule>"
	case r.Unlimited:
		return r.Key + ": unlimited"
	case r.Quota != nil:
		return r.Key + ": quota " + strconv.FormatInt(r.Quota.Limit, 10) + "/" + r.Quota.Period
	}
	return r.Key + ": " + r.Limit.String() + " " + r.Algorithm.String()
}

// Quota is a calendar quota: Limit events per calendar day or month, in
// UTC. Quotas are separate rules from rate limits and are reported as their
// own policy.
type Quota struct {
	Period string // "day" or "month"
	Limit  int64  // events per period; 0 admits nothing
}

// Quota periods.
const (
	QuotaDay   = "day"
	QuotaMonth = "month"
)

// Window returns the calendar period, in UTC, that contains t: [start, end).
func (q Quota) Window(t time.Time) (start, end time.Time) {
	t = t.UTC()
	if q.Period == QuotaMonth {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

// Config is one domain's rules: one envoyproxy/ratelimit YAML file. It is
// immutable once parsed and safe for concurrent use.
type Config struct {
	// Domain is the file's domain.
	Domain string
	// File is the file name given to Parse.
	File string

	root    *level
	rules   []*Rule
	domLine int
	binds   []binding // one per rule, in a Set bound to a store (Set.Bind); else nil

	warnings []Problem
}

// Warnings returns what c's file says that still works but should be
// written otherwise (a deprecated spelling), each at its file:line, in
// file order. A server logs them once at load; sluice check prints them.
func (c *Config) Warnings() []Problem { return c.warnings }

// Warnings returns the warnings of every config of s (Config.Warnings),
// in domain order.
func (s *Set) Warnings() []Problem {
	var out []Problem
	for _, dom := range s.domains {
		out = append(out, s.configs[dom].warnings...)
	}
	return out
}

func (c *Config) domainLine() int { return c.domLine }

// Rules returns every rule of c, in file order. The slice is shared: do
// not modify it.
func (c *Config) Rules() []*Rule { return c.rules }

// Set holds several domains (a directory of files). It is immutable once
// built and safe for concurrent use.
type Set struct {
	configs map[string]*Config
	domains []string
	store   ratelimit.Store // the store the Set is bound to (Bind), or nil
}

// NewSet returns a Set of cfgs. Two configs with the same domain are an
// error (*Errors), as in envoyproxy/ratelimit without MERGE_DOMAIN_CONFIG.
// Nil configs are skipped.
func NewSet(cfgs ...*Config) (*Set, error) {
	s := &Set{configs: make(map[string]*Config, len(cfgs))}
	var errs Errors
	for _, c := range cfgs {
		if c == nil {
			continue
		}
		if prev, ok := s.configs[c.Domain]; ok {
			errs = append(errs, Problem{
				File: c.File, Line: c.domainLine(), Path: "domain",
				Msg: fmt.Sprintf("duplicate domain %q (also in %s)", c.Domain, prev.File),
			})
			continue
		}
		s.configs[c.Domain] = c
		s.domains = append(s.domains, c.Domain)
	}
	if len(errs) > 0 {
		return nil, &errs
	}
	sort.Strings(s.domains)
	return s, nil
}

// Match returns the rule that entries match in domain, or nil when the
// domain is unknown or no rule matches. See Config.Match.
func (s *Set) Match(domain string, entries []Entry) *Rule {
	c := s.configs[domain]
	if c == nil {
		return nil
	}
	return c.Match(entries)
}

// Config returns the config of domain, or nil.
func (s *Set) Config(domain string) *Config { return s.configs[domain] }

// Domains returns the domains of s, sorted. The slice is shared: do not
// modify it.
func (s *Set) Domains() []string { return s.domains }

// Problem is one thing wrong with a rules file: "file:line: path: message".
type Problem struct {
	File string
	Line int    // 1-based; 0 when unknown
	Path string // e.g. "descriptors[0].rate_limit.unit"; "" for the whole file
	Msg  string
}

// Error formats p as "file:line: path: message".
func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ErrInvalid is matched (errors.Is) by every *Errors and Problem.
var ErrInvalid = errors.New("rules: invalid config")

// Is reports whether target is ErrInvalid.
func (p Problem) Is(target error) bool { return target == ErrInvalid }

// Errors lists every problem found in one or more files, in file and line
// order. Parse, LoadDir and NewSet return it as *Errors:
//
//	var errs *rules.Errors
//	if errors.As(err, &errs) { for _, p := range *errs { ... } }
type Errors []Problem

// Error returns one problem per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, p := range e {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so errors.As finds a Problem and errors.Is
// finds ErrInvalid.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, p := range e {
		out[i] = p
	}
	return out
}

func (e Errors) sort() {
	sort.SliceStable(e, func(i, j int) bool {
		if e[i].File != e[j].File {
			return e[i].File < e[j].File
		}
		return e[i].Line < e[j].Line
	})
}
