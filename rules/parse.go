package rules

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/ratelimit"
)

// Limits on what Parse accepts, so that a hostile file cannot exhaust
// memory or the stack (YAML aliases can expand exponentially). The node
// budget and the problem cap are yamlnode's, the same as the gateway
// config's.
const (
	maxDepth    = 64                   // nested descriptors levels
	maxNodes    = yamlnode.MaxNodes    // YAML nodes visited, aliases expanded
	maxProblems = yamlnode.MaxProblems // problems reported before giving up
)

// units are envoyproxy/ratelimit's rate limit units (the
// RateLimitResponse.RateLimit.Unit enum, matched case-insensitively as that
// server does) and their length.
var units = []struct {
	name string
	d    time.Duration
}{
	{"second", time.Second},
	{"minute", time.Minute},
	{"hour", time.Hour},
	{"day", 24 * time.Hour},
	{"week", 7 * 24 * time.Hour},
	{"month", 30 * 24 * time.Hour}, // envoyproxy/ratelimit's month: 30 days
	{"year", 365 * 24 * time.Hour}, // and year: 365 days; only the windows take it
}

// maxPeriodText is ratelimit.MaxPeriod, the bucket algorithms' longest
// period, for people; maxWindowText is ratelimit.MaxWindow, the window
// algorithms'.
var (
	maxPeriodText = fmt.Sprintf("about %d days", ratelimit.MaxPeriod/(24*time.Hour))
	maxWindowText = fmt.Sprintf("about %d years", ratelimit.MaxWindow/(365*24*time.Hour))
)

func unitNames() string {
	names := make([]string, 0, len(units))
	for _, u := range units {
		if u.d <= ratelimit.MaxWindow {
			names = append(names, u.name)
		}
	}
	return yamlnode.OrList(names)
}

// Parse parses one envoyproxy/ratelimit YAML file (with sluice's optional
// fields) and validates all of it. filename is used in problems and in
// Rule.File. The error, when not nil, is an *Errors listing every problem
// found, each as "file:line: path: message".
func Parse(filename string, data []byte) (*Config, error) {
	return parse(filename, data, maxNodes)
}

func parse(filename string, data []byte, nodeLimit int) (*Config, error) {
	p := &parser{file: filename, names: map[string]int{}}
	p.MaxNodes = nodeLimit
	p.Report = func(pr yamlnode.Problem) {
		p.errs = append(p.errs, Problem{File: p.file, Line: pr.Line, Path: pr.Path, Msg: pr.Msg})
	}
	cfg := p.parse(data)
	if len(p.errs) > 0 {
		p.errs.sort() // stable: "too many problems" stays last
		errs := p.errs
		return nil, &errs
	}
	for _, r := range cfg.rules {
		if !r.Unlimited && r.Quota == nil {
			r.keyPrefix = string(appendKeyPrefix(nil, r.Algorithm, r.Limit.Period, r.Domain))
		}
	}
	return cfg, nil
}

// parser reads a rules file with yamlnode's walker (the node helpers, the
// node budget and the problem cap the gateway's config has too).
type parser struct {
	yamlnode.Walker
	file     string
	errs     Errors
	names    map[string]int // explicit rule names → line of first definition
	replaces []replaceRef
	domain   string
	cfg      *Config
}

type replaceRef struct {
	name, path string
	line       int
}

func (p *parser) parse(data []byte) *Config {
	root := p.Root(data, "domain and descriptors")
	if root == nil {
		return nil
	}
	p.cfg = &Config{File: p.file, root: &level{}}
	var domainNode, descNode *yaml.Node
	p.Fields(root, "", map[string]func(k, v *yaml.Node){
		"domain":      func(k, v *yaml.Node) { domainNode = k; p.domain, _ = p.Str(v, "domain") },
		"descriptors": func(k, v *yaml.Node) { descNode = v },
	})
	switch {
	case domainNode == nil:
		p.Addf(root.Line, "domain", "missing domain")
	case p.domain == "":
		p.Addf(domainNode.Line, "domain", "config file cannot have empty domain")
	}
	p.cfg.Domain = p.domain
	p.cfg.domLine = root.Line
	if domainNode != nil {
		p.cfg.domLine = domainNode.Line
	}
	if descNode != nil {
		p.cfg.root = p.descriptors(descNode, "descriptors", p.domain, nil, 1)
	}
	for _, r := range p.replaces {
		if _, ok := p.names[r.name]; !ok {
			p.Addf(r.line, r.path, "no rate limit named %q in domain %q", r.name, p.domain)
		}
	}
	return p.cfg
}

// text reads a descriptor key or value: a string, or an integer or boolean
// taken as its text. envoyproxy/ratelimit refuses other scalars (a float
// such as 1.5), so sluice does too, with a hint.
func (p *parser) text(n *yaml.Node, path string) (string, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
		p.Addf(n.Line, path, "%s is a number, not a string: quote it (%q)", n.Value, n.Value)
		return "", false
	}
	return p.Str(n, path)
}

// boolean reads a boolean field; YAML 1.1's yes/no/on/off are booleans,
// as in yaml.v2, which envoyproxy/ratelimit uses.
func (p *parser) boolean(n *yaml.Node, path string) bool {
	b, _ := p.Bool(n, path)
	return b
}

// nonNull returns n, or nil for a YAML null: an empty "rate_limit:" is no
// rate limit, as in envoyproxy/ratelimit.
func nonNull(n *yaml.Node) *yaml.Node {
	if yamlnode.IsNull(n) {
		return nil
	}
	return n
}

// level is one list of descriptors, indexed for matching.
type level struct {
	nodes     map[string]*node // by local composite key: key_value, or key alone
	wildcards []*node          // those whose composite key has a '*', in file order
	all       []*node          // in file order
}

// node is one descriptor.
type node struct {
	key, value string
	local      string   // the composite key within its level: key + "_" + value, or key
	parts      []string // local split on '*', for wildcards
	wildcard   bool
	line       int
	rule       *Rule
	children   *level // nil when the descriptor has no nested descriptors
}

// localKey is envoyproxy/ratelimit's composite key of a descriptor within
// its level: key_value, or the key alone when it has no value.
func localKey(key, value string) string {
	if value == "" {
		return key
	}
	return key + "_" + value
}

func (l *level) find(local string) *node { return l.nodes[local] }

func (l *level) insert(n *node) {
	if l.nodes == nil {
		l.nodes = map[string]*node{}
	}
	// A wildcard is also found by its exact pattern, which envoyproxy/ratelimit
	// tries first ("foo*" matches the value "foo*" exactly).
	l.nodes[n.local] = n
	if n.wildcard {
		l.wildcards = append(l.wildcards, n)
	}
	l.all = append(l.all, n)
}

// descriptors parses a list of descriptors. parentKey is the full key of
// the parent ("domain" at the top).
func (p *parser) descriptors(n *yaml.Node, path, parentKey string, steps []step, depth int) *level {
	lvl := &level{}
	switch {
	case yamlnode.IsNull(n):
		return lvl
	case n.Kind != yaml.SequenceNode:
		p.Addf(n.Line, path, "want a list of descriptors, got %s", yamlnode.Kind(n))
		return lvl
	case depth > maxDepth:
		p.Addf(n.Line, path, "descriptors nested more than %d levels deep", maxDepth)
		return lvl
	}
	p.List(n, path, func(_ int, item *yaml.Node, ipath string) {
		if item.Kind != yaml.MappingNode {
			p.Addf(item.Line, ipath, "want a descriptor (a mapping with key, value, rate_limit, descriptors…), got %s", yamlnode.Kind(item))
			return
		}
		d := p.descriptor(item, ipath, parentKey, steps, depth)
		if d == nil {
			return
		}
		if prev := lvl.find(d.local); prev != nil {
			p.Addf(d.line, ipath, "duplicate descriptor composite key %q (first at line %d)", compositeKey(parentKey, d.key, d.value), prev.line)
			return
		}
		lvl.insert(d)
	})
	return lvl
}

func compositeKey(parentKey, key, value string) string {
	k := parentKey + "." + key
	if value != "" {
		k += "_" + value
	}
	return k
}

// descriptorFields are a descriptor's fields, as parsed.
type descriptorFields struct {
	keyNode, rlNode, quotaNode, childNode, shareNode *yaml.Node
	key, value                                       string
	shadow, detailed, v2m, share, quotaMode          bool
	keyOK                                            bool
	metadata                                         map[string]any
}

// descriptor parses one descriptor; it returns nil when it has no usable
// key (the problem is reported).
func (p *parser) descriptor(n *yaml.Node, path, parentKey string, steps []step, depth int) *node {
	f := p.descriptorFields(n, path)
	ok := p.descriptorKey(n, path, f)
	local := localKey(f.key, f.value)
	wildcard := strings.Contains(local, "*")
	if f.share && !wildcard {
		p.Addf(f.shareNode.Line, yamlnode.Join(path, "share_threshold"), "share_threshold can only be used with wildcard values (containing '*'), but value is %q", f.value)
	}
	fullKey := compositeKey(parentKey, f.key, f.value)
	d := &node{key: f.key, value: f.value, local: local, wildcard: wildcard, line: n.Line}
	if wildcard {
		d.parts = strings.Split(local, "*")
	}
	st := append(slices.Clip(steps), step{key: f.key, value: f.value, local: local, parts: d.parts, wildcard: wildcard, shareThresh: f.share, valueToMetric: f.v2m})
	d.rule = p.descriptorRule(n, path, f, fullKey, st)
	if f.childNode != nil {
		children := p.descriptors(f.childNode, yamlnode.Join(path, "descriptors"), fullKey, st, depth+1)
		if len(children.all) > 0 {
			d.children = children
		}
	}
	if !ok {
		return nil
	}
	return d
}

// descriptorFields parses the fields of the descriptor n.
func (p *parser) descriptorFields(n *yaml.Node, path string) *descriptorFields {
	f := &descriptorFields{}
	p.Fields(n, path, map[string]func(k, v *yaml.Node){
		"key":             func(k, v *yaml.Node) { f.keyNode = v; f.key, f.keyOK = p.text(v, yamlnode.Join(path, "key")) },
		"value":           func(k, v *yaml.Node) { f.value, _ = p.text(v, yamlnode.Join(path, "value")) },
		"rate_limit":      func(k, v *yaml.Node) { f.rlNode = nonNull(v) },
		"descriptors":     func(k, v *yaml.Node) { f.childNode = v },
		"shadow_mode":     func(k, v *yaml.Node) { f.shadow = p.boolean(v, yamlnode.Join(path, "shadow_mode")) },
		"detailed_metric": func(k, v *yaml.Node) { f.detailed = p.boolean(v, yamlnode.Join(path, "detailed_metric")) },
		"value_to_metric": func(k, v *yaml.Node) { f.v2m = p.boolean(v, yamlnode.Join(path, "value_to_metric")) },
		"share_threshold": func(k, v *yaml.Node) { f.shareNode = v; f.share = p.boolean(v, yamlnode.Join(path, "share_threshold")) },
		"quota_mode":      func(k, v *yaml.Node) { f.quotaMode = p.boolean(v, yamlnode.Join(path, "quota_mode")) },
		"quota":           func(k, v *yaml.Node) { f.quotaNode = nonNull(v) },
		"metadata":        func(k, v *yaml.Node) { f.metadata = p.metadata(v, yamlnode.Join(path, "metadata")) },
	})
	return f
}

// descriptorKey reports a descriptor without a usable key; false if so.
func (p *parser) descriptorKey(n *yaml.Node, path string, f *descriptorFields) bool {
	switch {
	case f.keyNode == nil:
		p.Addf(n.Line, yamlnode.Join(path, "key"), "descriptor has no key")
		return false
	case !f.keyOK:
		return false
	case f.key == "":
		p.Addf(f.keyNode.Line, yamlnode.Join(path, "key"), "descriptor has empty key")
		return false
	}
	return true
}

// descriptorRule parses the descriptor's rate_limit or quota into its
// rule, the config's next; nil when it has neither (or it is refused).
func (p *parser) descriptorRule(n *yaml.Node, path string, f *descriptorFields, fullKey string, st []step) *Rule {
	if f.rlNode != nil && f.quotaNode != nil {
		p.Addf(f.quotaNode.Line, yamlnode.Join(path, "quota"), "a descriptor has a rate_limit or a quota, not both: quotas are separate rules (give the quota its own descriptor)")
	}
	var r *Rule
	switch {
	case f.rlNode != nil:
		r = p.rateLimit(f.rlNode, yamlnode.Join(path, "rate_limit"))
	case f.quotaNode != nil:
		r = p.quota(f.quotaNode, yamlnode.Join(path, "quota"))
	}
	if r == nil {
		return nil
	}
	r.Domain = p.domain
	r.Key = fullKey
	if !r.explicitName {
		r.Name = fullKey
	}
	r.ShadowMode = f.shadow
	r.DetailedMetric = f.detailed
	r.QuotaMode = f.quotaMode
	r.Metadata = f.metadata
	r.File = p.file
	r.Line = n.Line
	r.path = st
	if p.cfg != nil {
		r.seq = len(p.cfg.rules)
		p.cfg.rules = append(p.cfg.rules, r)
	}
	return r
}

// metadata parses a descriptor's metadata: any mapping, which
// envoyproxy/ratelimit hands back in the response's dynamic metadata and
// which decides nothing.
func (p *parser) metadata(n *yaml.Node, path string) map[string]any {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.Addf(n.Line, path, "want a mapping, got %s", yamlnode.Kind(n))
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		p.Addf(n.Line, path, "%v", err)
		return nil
	}
	return m
}

// rateLimit parses a rate_limit block. It returns nil after reporting
// problems that leave no usable rule.
func (p *parser) rateLimit(n *yaml.Node, path string) *Rule {
	if n.Kind != yaml.MappingNode {
		p.Addf(n.Line, path, "want a mapping with unit and requests_per_unit, got %s", yamlnode.Kind(n))
		return nil
	}
	f := p.rateLimitFields(n, path)
	r := p.nameAndReplaces(f, path)
	if f.unlimited {
		p.checkUnlimited(f, path)
		r.Unlimited = true
		return r
	}
	period, ok := p.period(r, f, n, path)
	if !ok || f.bad || !p.fitsAlgorithm(f, period, path) {
		return nil
	}
	r.Algorithm = f.alg
	r.Limit = ratelimit.Limit{Rate: f.rpu, Period: period, Burst: f.burst}
	if f.prefetch {
		if err := f.alg.Prefetchable(); err != nil {
			p.Addf(f.prefetchNode.Line, yamlnode.Join(path, f.prefetchName), "%s", strings.TrimPrefix(err.Error(), "ratelimit: "))
			return nil
		}
	}
	r.Prefetch = f.prefetch
	if err := r.Limit.Validate(); err != nil {
		p.Addf(n.Line, path, "%s", strings.TrimPrefix(err.Error(), "ratelimit: "))
		return nil
	}
	return r
}

// rateLimitFields is what a rate_limit block says, field by field: each
// field's node (nil when absent) and its value.
type rateLimitFields struct {
	unitNode, rpuNode, multNode, algNode, burstNode, windowNode, nameNode *yaml.Node

	unit, name       string
	rpu, burst, mult int64
	unlimited        bool
	prefetch         bool
	prefetchNode     *yaml.Node
	prefetchName     string // "prefetch", or "lease" (its deprecated spelling)
	alg              ratelimit.Algorithm
	window           time.Duration
	replaces         []string
	replaceLines     []int
	bad              bool // a field's value was reported
}

// rateLimitFields reads the fields of rate_limit block n, reporting the
// values that are wrong on their own.
func (p *parser) rateLimitFields(n *yaml.Node, path string) *rateLimitFields {
	f := &rateLimitFields{alg: ratelimit.FixedWindow}
	at := func(field string) string { return yamlnode.Join(path, field) }
	integer := func(v *yaml.Node, field string, lo, hi int64) int64 {
		i, ok := p.Int(v, at(field), lo, hi)
		f.bad = f.bad || !ok
		return i
	}
	p.Fields(n, path, map[string]func(k, v *yaml.Node){
		"unit": func(k, v *yaml.Node) { f.unitNode = v; f.unit, _ = p.Str(v, at("unit")) },
		"requests_per_unit": func(k, v *yaml.Node) {
			f.rpuNode, f.rpu = v, integer(v, "requests_per_unit", 0, math.MaxUint32)
		},
		// envoyproxy/ratelimit's number of units in the period (a uint32
		// there; 0 is refused).
		"unit_multiplier": func(k, v *yaml.Node) {
			f.multNode, f.mult = v, integer(v, "unit_multiplier", 1, math.MaxUint32)
		},
		"unlimited": func(k, v *yaml.Node) { f.unlimited = p.boolean(v, at("unlimited")) },
		"name":      func(k, v *yaml.Node) { f.nameNode = v; f.name, _ = p.Str(v, at("name")) },
		"replaces":  func(k, v *yaml.Node) { f.replaces, f.replaceLines = p.replacesList(v, at("replaces")) },
		"algorithm": func(k, v *yaml.Node) {
			f.algNode = v
			s, _ := p.Str(v, at("algorithm"))
			a, err := ratelimit.ParseAlgorithm(s)
			if err != nil {
				p.Addf(v.Line, at("algorithm"), "unknown algorithm %q (want %s)", s, yamlnode.OrList(algorithmNames()))
				f.bad = true
				return
			}
			f.alg = a
		},
		"burst":    func(k, v *yaml.Node) { f.burstNode, f.burst = v, integer(v, "burst", 1, math.MaxInt64) },
		"prefetch": func(k, v *yaml.Node) { p.prefetch(f, v, "prefetch", path) },
		"lease":    func(k, v *yaml.Node) { p.prefetch(f, v, "lease", path) },
		"window": func(k, v *yaml.Node) {
			f.windowNode = v
			d, ok := p.Duration(v, at("window"))
			switch {
			case !ok:
				f.bad = true
			case d > ratelimit.MaxWindow:
				p.Addf(v.Line, at("window"), "window %s is longer than the longest period sluice enforces (%s)", v.Value, maxWindowText)
				f.bad = true
			default:
				f.window = d
			}
		},
	})
	return f
}

// nameAndReplaces starts the rule: its explicit name, and the names it
// replaces, checked once every rule of the file is known.
func (p *parser) nameAndReplaces(f *rateLimitFields, path string) *Rule {
	r := &Rule{Replaces: f.replaces, Algorithm: ratelimit.FixedWindow}
	if f.nameNode != nil && f.name != "" {
		r.Name, r.explicitName = f.name, true
		if _, dup := p.names[f.name]; !dup {
			p.names[f.name] = f.nameNode.Line
		}
	}
	for i, rep := range f.replaces {
		rpath := fmt.Sprintf("%s.replaces[%d].name", path, i)
		switch {
		case rep == "":
			p.Addf(f.replaceLines[i], rpath, "should not have an empty replaces entry")
		case rep == f.name:
			p.Addf(f.replaceLines[i], rpath, "replaces should not contain name of same descriptor")
		default:
			p.replaces = append(p.replaces, replaceRef{name: rep, path: rpath, line: f.replaceLines[i]})
		}
	}
	return r
}

// checkUnlimited reports the fields that mean nothing on an unlimited
// rule.
func (p *parser) checkUnlimited(f *rateLimitFields, path string) {
	if f.unitNode != nil && unitKnown(f.unit) {
		p.Addf(f.unitNode.Line, yamlnode.Join(path, "unit"), "should not specify rate limit unit when unlimited")
	}
	for _, g := range []struct {
		n    *yaml.Node
		name string
	}{{f.algNode, "algorithm"}, {f.burstNode, "burst"}, {f.windowNode, "window"}, {f.prefetchNode, f.prefetchName}} {
		if g.n != nil {
			p.Addf(g.n.Line, yamlnode.Join(path, g.name), "%s has no meaning when unlimited", g.name)
		}
	}
}

// prefetch reads a rate_limit's prefetch (name "prefetch"), or lease,
// its deprecated spelling, which means the same and is noted as a
// warning (Config.Warnings). Both in one block is an error.
func (p *parser) prefetch(f *rateLimitFields, v *yaml.Node, name, path string) {
	if f.prefetchNode != nil {
		p.Addf(v.Line, yamlnode.Join(path, name), "lease is the deprecated spelling of prefetch: give prefetch only")
		return
	}
	f.prefetchNode, f.prefetchName, f.prefetch = v, name, p.boolean(v, yamlnode.Join(path, name))
	if name == "lease" && p.cfg != nil {
		p.cfg.warnings = append(p.cfg.warnings, Problem{File: p.file, Line: v.Line, Path: yamlnode.Join(path, name),
			Msg: "lease is deprecated (it now means the in-flight slot only): write prefetch: " + v.Value + ", which means the same"})
	}
}

// period is the rule's period: a sluice window, or envoyproxy/ratelimit's
// unit × unit_multiplier (recorded in r). It is false after a problem.
func (p *parser) period(r *Rule, f *rateLimitFields, n *yaml.Node, path string) (time.Duration, bool) {
	switch {
	case f.windowNode != nil && f.unitNode != nil:
		p.Addf(f.windowNode.Line, yamlnode.Join(path, "window"), "give unit or window, not both")
		return 0, false
	case f.windowNode != nil && f.multNode != nil:
		p.Addf(f.multNode.Line, yamlnode.Join(path, "unit_multiplier"), "unit_multiplier multiplies unit, not window: give unit and unit_multiplier, or the whole period as window")
		return 0, false
	case f.windowNode != nil:
		return f.window, !f.bad
	case f.unitNode == nil:
		p.Addf(n.Line, yamlnode.Join(path, "unit"), "missing unit (want %s; or a sluice window such as \"10s\")", unitNames())
		return 0, false
	}
	d, known := unitDuration(f.unit)
	unit := strings.ToLower(f.unit)
	switch {
	case !known:
		p.Addf(f.unitNode.Line, yamlnode.Join(path, "unit"), "unknown unit %q (want %s)", f.unit, unitNames())
		return 0, false
	case d > ratelimit.MaxWindow:
		p.Addf(f.unitNode.Line, yamlnode.Join(path, "unit"), "unit %s is longer than the longest period sluice enforces (%s)", unit, maxWindowText)
		return 0, false
	case f.mult > 0 && time.Duration(f.mult) > ratelimit.MaxWindow/d:
		p.Addf(f.multNode.Line, yamlnode.Join(path, "unit_multiplier"), "unit_multiplier %d × %s is longer than the longest period sluice enforces (%s)", f.mult, unit, maxWindowText)
		return 0, false
	}
	// As envoyproxy/ratelimit: the period is unit × unit_multiplier, a
	// fixed window aligned to the Unix epoch in multiples of it.
	r.Unit, r.UnitMultiplier = unit, uint32(f.mult)
	return d * time.Duration(max(1, f.mult)), true
}

// fitsAlgorithm reports, and returns false for, what the rule's algorithm
// cannot enforce: a burst on a window algorithm, a bucket period longer
// than ratelimit.MaxPeriod, more than one event per nanosecond.
func (p *parser) fitsAlgorithm(f *rateLimitFields, period time.Duration, path string) bool {
	alg := f.alg
	if f.burstNode != nil && alg.Windowed() {
		if f.algNode == nil {
			p.Addf(f.burstNode.Line, yamlnode.Join(path, "burst"), "burst applies only to the bucket algorithms (gcra, token_bucket, leaky_bucket); with no algorithm the rule is a fixed_window, as in envoyproxy/ratelimit: set algorithm")
		} else {
			p.Addf(f.burstNode.Line, yamlnode.Join(path, "burst"), "burst applies only to the bucket algorithms (gcra, token_bucket, leaky_bucket), not %s", alg)
		}
		return false
	}
	if period > ratelimit.MaxPeriod && !alg.Windowed() {
		// A year (envoyproxy/ratelimit's longest unit) is a window's period;
		// a bucket refilling over more than MaxPeriod is not enforced.
		unit := strings.ToLower(f.unit)
		node, field, what := f.unitNode, "unit", "unit "+unit
		switch {
		case f.windowNode != nil:
			node, field, what = f.windowNode, "window", "window "+f.windowNode.Value
		case f.multNode != nil:
			node, field, what = f.multNode, "unit_multiplier", fmt.Sprintf("unit_multiplier %d × %s", f.mult, unit)
		}
		p.Addf(node.Line, yamlnode.Join(path, field), "%s is longer than %s enforces (%s); the window algorithms take up to %s: drop algorithm (a fixed window, as in envoyproxy/ratelimit) or use a window algorithm", what, alg, maxPeriodText, maxWindowText)
		return false
	}
	if f.rpu > int64(period) && !alg.Windowed() {
		// envoyproxy/ratelimit accepts this (often as "no real limit") and
		// so do sluice's window algorithms, its default; the bucket
		// algorithms refill at most one event per nanosecond.
		p.Addf(f.rpuNode.Line, yamlnode.Join(path, "requests_per_unit"), "%d per %v is more than %s enforces: at most one event per nanosecond (%d per %v); use a window algorithm or unlimited: true", f.rpu, period, alg, int64(period), period)
		return false
	}
	return true
}

func algorithmNames() []string {
	var s []string
	for _, a := range ratelimit.Algorithms() {
		s = append(s, a.String())
	}
	return s
}

func unitDuration(s string) (time.Duration, bool) {
	for _, u := range units {
		if strings.EqualFold(u.name, s) {
			return u.d, true
		}
	}
	return 0, false
}

func unitKnown(s string) bool { _, ok := unitDuration(s); return ok }

// replacesList parses replaces: a list of {name: x}.
func (p *parser) replacesList(n *yaml.Node, path string) ([]string, []int) {
	if !yamlnode.IsNull(n) && n.Kind != yaml.SequenceNode {
		p.Addf(n.Line, path, "want a list of {name: …}, got %s", yamlnode.Kind(n))
		return nil, nil
	}
	var names []string
	var lines []int
	p.List(n, path, func(_ int, e *yaml.Node, epath string) {
		if e.Kind != yaml.MappingNode {
			p.Addf(e.Line, epath, "want a mapping with name, got %s", yamlnode.Kind(e))
			return
		}
		name := ""
		p.Fields(e, epath, map[string]func(k, v *yaml.Node){
			"name": func(k, v *yaml.Node) { name, _ = p.Str(v, yamlnode.Join(epath, "name")) },
		})
		names = append(names, name)
		lines = append(lines, e.Line)
	})
	return names, lines
}

// quota parses sluice's quota block: {period: day|month, limit: N}.
func (p *parser) quota(n *yaml.Node, path string) *Rule {
	if n.Kind != yaml.MappingNode {
		p.Addf(n.Line, path, "want a mapping with period and limit, got %s", yamlnode.Kind(n))
		return nil
	}
	var periodNode, limitNode *yaml.Node
	var period string
	var limit int64
	ok := true
	p.Fields(n, path, map[string]func(k, v *yaml.Node){
		"period": func(k, v *yaml.Node) { periodNode = v; period, _ = p.Str(v, yamlnode.Join(path, "period")) },
		"limit": func(k, v *yaml.Node) {
			limitNode = v
			var good bool
			if limit, good = p.Int(v, yamlnode.Join(path, "limit"), 0, math.MaxInt64); !good {
				ok = false
			}
		},
	})
	switch {
	case periodNode == nil:
		p.Addf(n.Line, yamlnode.Join(path, "period"), "missing period (want day or month)")
		ok = false
	case period != QuotaDay && period != QuotaMonth:
		p.Addf(periodNode.Line, yamlnode.Join(path, "period"), "unknown quota period %q (want day or month)", period)
		ok = false
	}
	if limitNode == nil {
		p.Addf(n.Line, yamlnode.Join(path, "limit"), "missing limit")
		ok = false
	}
	if !ok {
		return nil
	}
	return &Rule{Quota: &Quota{Period: period, Limit: limit}, Algorithm: ratelimit.FixedWindow}
}
