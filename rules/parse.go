package rules

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/didyoumean"
	"github.com/sluicehq/sluice/internal/yamlnode"
	"github.com/sluicehq/sluice/ratelimit"
)

// Limits on what Parse accepts, so that a hostile file cannot exhaust
// memory or the stack (YAML aliases can expand exponentially).
const (
	maxDepth    = 64      // nested descriptors levels
	maxNodes    = 1 << 20 // YAML nodes visited, aliases expanded
	maxProblems = 100     // problems reported before giving up
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
	return orList(names)
}

// orList formats ["a","b","c"] as "a, b or c".
func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Parse parses one envoyproxy/ratelimit YAML file (with sluice's optional
// fields) and validates all of it. filename is used in problems and in
// Rule.File. The error, when not nil, is an *Errors listing every problem
// found, each as "file:line: path: message".
func Parse(filename string, data []byte) (*Config, error) {
	return parse(filename, data, maxNodes)
}

func parse(filename string, data []byte, nodeLimit int) (*Config, error) {
	p := &parser{file: filename, names: map[string]int{}, maxNodes: nodeLimit}
	cfg := p.parse(data)
	if len(p.errs) > 0 {
		p.errs.sort()
		if p.truncated {
			p.errs = append(p.errs, Problem{File: p.file, Msg: fmt.Sprintf("too many problems: stopped after %d", maxProblems)})
		}
		errs := p.errs
		return nil, &errs
	}
	return cfg, nil
}

type parser struct {
	file      string
	errs      Errors
	nodes     int
	maxNodes  int
	tooBig    bool
	truncated bool
	names     map[string]int // explicit rule names → line of first definition
	replaces  []replaceRef
	domain    string
	cfg       *Config
}

type replaceRef struct {
	name, path string
	line       int
}

func (p *parser) add(line int, path, format string, args ...any) {
	switch {
	case len(p.errs) < maxProblems:
		p.errs = append(p.errs, Problem{File: p.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	default:
		p.truncated = true
	}
}

func (p *parser) parse(data []byte) *Config {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlnode.ErrorLine(err)
		p.add(line, "", "invalid YAML: %s", msg)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.add(0, "", "empty file (want domain and descriptors)")
		return nil
	}
	root := p.deref(doc.Content[0])
	if root == nil {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.add(root.Line, "", "want a mapping with domain and descriptors, got %s", yamlnode.Kind(root))
		return nil
	}
	p.cfg = &Config{File: p.file, root: &level{}}
	var domainNode, descNode *yaml.Node
	p.fields(root, "", map[string]func(k, v *yaml.Node){
		"domain":      func(k, v *yaml.Node) { domainNode = k; p.domain, _ = p.str(v, "domain") },
		"descriptors": func(k, v *yaml.Node) { descNode = v },
	})
	switch {
	case domainNode == nil:
		p.add(root.Line, "domain", "missing domain")
	case p.domain == "":
		p.add(domainNode.Line, "domain", "config file cannot have empty domain")
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
			p.add(r.line, r.path, "no rate limit named %q in domain %q", r.name, p.domain)
		}
	}
	return p.cfg
}

// deref follows aliases and counts nodes against maxNodes.
func (p *parser) deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	p.nodes++
	if p.truncated {
		return nil
	}
	if p.nodes > p.maxNodes {
		if !p.tooBig {
			p.tooBig = true
			p.add(0, "", "file too large: more than %d YAML nodes once aliases are expanded", p.maxNodes)
		}
		return nil
	}
	return n
}

// fields calls the handler of each key of mapping n, and reports unknown
// and duplicate keys. Merge keys (<<) are expanded; explicit keys win.
func (p *parser) fields(n *yaml.Node, path string, handlers map[string]func(k, v *yaml.Node)) {
	type pair struct{ k, v *yaml.Node }
	var pairs []pair
	seen := map[string]int{}
	var merged []pair
	var collect func(m *yaml.Node, explicit bool, depth int)
	collect = func(m *yaml.Node, explicit bool, depth int) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], p.deref(m.Content[i+1])
			if v == nil {
				return
			}
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				if depth > 8 {
					p.add(k.Line, path, "merge keys nested too deep")
					continue
				}
				switch v.Kind {
				case yaml.MappingNode:
					collect(v, false, depth+1)
				case yaml.SequenceNode:
					for _, e := range v.Content {
						if e = p.deref(e); e != nil && e.Kind == yaml.MappingNode {
							collect(e, false, depth+1)
						}
					}
				default:
					p.add(k.Line, path, "merge key (<<) wants a mapping, got %s", yamlnode.Kind(v))
				}
				continue
			}
			if !explicit {
				merged = append(merged, pair{k, v})
				continue
			}
			pairs = append(pairs, pair{k, v})
		}
	}
	collect(n, true, 0)
	for _, pr := range pairs {
		name := pr.k.Value
		if pr.k.Kind != yaml.ScalarNode {
			p.add(pr.k.Line, path, "field name is %s, want a string", yamlnode.Kind(pr.k))
			continue
		}
		if first, dup := seen[name]; dup {
			p.add(pr.k.Line, yamlnode.Join(path, name), "duplicate field (first at line %d)", first)
			continue
		}
		seen[name] = pr.k.Line
		h, ok := handlers[name]
		if !ok || pr.k.Tag != "!!str" {
			p.add(pr.k.Line, path, "unknown field %q%s", name, suggest(name, handlers))
			continue
		}
		h(pr.k, pr.v)
	}
	for _, pr := range merged {
		name := pr.k.Value
		if _, dup := seen[name]; dup {
			continue
		}
		seen[name] = pr.k.Line
		h, ok := handlers[name]
		if !ok || pr.k.Tag != "!!str" {
			p.add(pr.k.Line, path, "unknown field %q%s", name, suggest(name, handlers))
			continue
		}
		h(pr.k, pr.v)
	}
}

// suggest returns ` (did you mean "x"?)` for the known field closest to
// name, or ` (want a, b or c)`.
func suggest(name string, handlers map[string]func(k, v *yaml.Node)) string {
	known := make([]string, 0, len(handlers))
	for k := range handlers {
		known = append(known, k)
	}
	sort.Strings(known)
	if best := didyoumean.Closest(name, known); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (want " + orList(known) + ")"
}

// str reads a scalar as a string. Like envoyproxy/ratelimit (yaml.v2), a
// number or a boolean is taken as its text; null is "".
func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.add(n.Line, path, "want a string, got %s", yamlnode.Kind(n))
		return "", false
	}
	if n.Tag == "!!null" {
		return "", true
	}
	return n.Value, true
}

// text reads a descriptor key or value: a string, or an integer or boolean
// taken as its text. envoyproxy/ratelimit refuses other scalars (a float
// such as 1.5), so sluice does too, with a hint.
func (p *parser) text(n *yaml.Node, path string) (string, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
		p.add(n.Line, path, "%s is a number, not a string: quote it (%q)", n.Value, n.Value)
		return "", false
	}
	return p.str(n, path)
}

// boolean reads true/false (and YAML 1.1's yes/no/on/off, as yaml.v2 does).
func (p *parser) boolean(n *yaml.Node, path string) bool {
	if n.Kind == yaml.ScalarNode {
		switch strings.ToLower(n.Value) {
		case "true", "yes", "y", "on":
			if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 {
				return true
			}
		case "false", "no", "n", "off":
			if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 {
				return false
			}
		case "", "~", "null":
			if n.Tag == "!!null" {
				return false
			}
		}
	}
	p.add(n.Line, path, "want true or false, got %s", yamlnode.Kind(n))
	return false
}

// integer reads a whole number in [lo, hi].
func (p *parser) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil && v >= lo && v <= hi {
			return v, true
		}
	}
	p.add(n.Line, path, "want a whole number from %d to %d, got %s", lo, hi, yamlnode.Kind(n))
	return 0, false
}

// nonNull returns n, or nil for a YAML null: an empty "rate_limit:" is no
// rate limit, as in envoyproxy/ratelimit.
func nonNull(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	return n
}

// level is one list of descriptors, indexed for matching.
type level struct {
	exact     map[Entry]*node
	keyOnly   map[string]*node
	wildcards []*node // in file order
	all       []*node // in file order
}

// node is one descriptor.
type node struct {
	key, value string
	prefix     string // the value without its trailing '*', for wildcards
	wildcard   bool
	line       int
	rule       *Rule
	children   *level // nil when the descriptor has no nested descriptors
}

func (l *level) find(key, value string) *node {
	if value == "" {
		return l.keyOnly[key]
	}
	return l.exact[Entry{key, value}]
}

func (l *level) insert(n *node) {
	if n.value == "" {
		if l.keyOnly == nil {
			l.keyOnly = map[string]*node{}
		}
		l.keyOnly[n.key] = n
	} else {
		// A wildcard is also found by its exact pattern, which envoyproxy/ratelimit
		// tries first ("foo*" matches the value "foo*" exactly).
		if l.exact == nil {
			l.exact = map[Entry]*node{}
		}
		l.exact[Entry{n.key, n.value}] = n
		if n.wildcard {
			l.wildcards = append(l.wildcards, n)
		}
	}
	l.all = append(l.all, n)
}

// descriptors parses a list of descriptors. parentKey is the full key of
// the parent ("domain" at the top).
func (p *parser) descriptors(n *yaml.Node, path, parentKey string, steps []step, depth int) *level {
	lvl := &level{}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return lvl
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, path, "want a list of descriptors, got %s", yamlnode.Kind(n))
		return lvl
	}
	if depth > maxDepth {
		p.add(n.Line, path, "descriptors nested more than %d levels deep", maxDepth)
		return lvl
	}
	for i, item := range n.Content {
		item = p.deref(item)
		if item == nil {
			return lvl
		}
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			p.add(item.Line, ipath, "want a descriptor (a mapping with key, value, rate_limit, descriptors…), got %s", yamlnode.Kind(item))
			continue
		}
		if d := p.descriptor(item, ipath, parentKey, steps, depth); d != nil {
			if prev := lvl.find(d.key, d.value); prev != nil {
				p.add(d.line, ipath, "duplicate descriptor composite key %q (first at line %d)", compositeKey(parentKey, d.key, d.value), prev.line)
				continue
			}
			lvl.insert(d)
		}
	}
	return lvl
}

func compositeKey(parentKey, key, value string) string {
	k := parentKey + "." + key
	if value != "" {
		k += "_" + value
	}
	return k
}

// descriptor parses one descriptor; it returns nil when it has no usable
// key (the problem is reported).
func (p *parser) descriptor(n *yaml.Node, path, parentKey string, steps []step, depth int) *node {
	var (
		keyNode, rlNode, quotaNode, childNode, shareNode *yaml.Node
		key, value                                       string
		shadow, detailed, v2m, share, quotaMode          bool
		keyOK                                            bool
	)
	p.fields(n, path, map[string]func(k, v *yaml.Node){
		"key":             func(k, v *yaml.Node) { keyNode = v; key, keyOK = p.text(v, yamlnode.Join(path, "key")) },
		"value":           func(k, v *yaml.Node) { value, _ = p.text(v, yamlnode.Join(path, "value")) },
		"rate_limit":      func(k, v *yaml.Node) { rlNode = nonNull(v) },
		"descriptors":     func(k, v *yaml.Node) { childNode = v },
		"shadow_mode":     func(k, v *yaml.Node) { shadow = p.boolean(v, yamlnode.Join(path, "shadow_mode")) },
		"detailed_metric": func(k, v *yaml.Node) { detailed = p.boolean(v, yamlnode.Join(path, "detailed_metric")) },
		"value_to_metric": func(k, v *yaml.Node) { v2m = p.boolean(v, yamlnode.Join(path, "value_to_metric")) },
		"share_threshold": func(k, v *yaml.Node) { shareNode = v; share = p.boolean(v, yamlnode.Join(path, "share_threshold")) },
		"quota_mode":      func(k, v *yaml.Node) { quotaMode = p.boolean(v, yamlnode.Join(path, "quota_mode")) },
		"quota":           func(k, v *yaml.Node) { quotaNode = nonNull(v) },
	})
	ok := true
	switch {
	case keyNode == nil:
		p.add(n.Line, yamlnode.Join(path, "key"), "descriptor has no key")
		ok = false
	case !keyOK:
		ok = false
	case key == "":
		p.add(keyNode.Line, yamlnode.Join(path, "key"), "descriptor has empty key")
		ok = false
	}
	wildcard := strings.HasSuffix(value, "*")
	if share && !wildcard {
		p.add(shareNode.Line, yamlnode.Join(path, "share_threshold"), "share_threshold can only be used with wildcard values (ending with '*'), but value is %q", value)
	}
	fullKey := compositeKey(parentKey, key, value)
	d := &node{key: key, value: value, wildcard: wildcard, line: n.Line}
	if wildcard {
		d.prefix = strings.TrimSuffix(value, "*")
	}
	st := append(slices.Clip(steps), step{key: key, value: value, wildcard: wildcard, shareThresh: share, valueToMetric: v2m})

	if rlNode != nil && quotaNode != nil {
		p.add(quotaNode.Line, yamlnode.Join(path, "quota"), "a descriptor has a rate_limit or a quota, not both: quotas are separate rules (give the quota its own descriptor)")
	}
	var r *Rule
	switch {
	case rlNode != nil:
		r = p.rateLimit(rlNode, yamlnode.Join(path, "rate_limit"))
	case quotaNode != nil:
		r = p.quota(quotaNode, yamlnode.Join(path, "quota"))
	}
	if r != nil {
		r.Domain = p.domain
		r.Key = fullKey
		if !r.explicitName {
			r.Name = fullKey
		}
		r.ShadowMode = shadow
		r.DetailedMetric = detailed
		r.QuotaMode = quotaMode
		r.File = p.file
		r.Line = n.Line
		r.path = st
		d.rule = r
		if p.cfg != nil {
			p.cfg.rules = append(p.cfg.rules, r)
		}
	}
	if childNode != nil {
		children := p.descriptors(childNode, yamlnode.Join(path, "descriptors"), fullKey, st, depth+1)
		if len(children.all) > 0 {
			d.children = children
		}
	}
	if !ok {
		return nil
	}
	return d
}

// rateLimit parses a rate_limit block. It returns nil after reporting
// problems that leave no usable rule.
func (p *parser) rateLimit(n *yaml.Node, path string) *Rule {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want a mapping with unit and requests_per_unit, got %s", yamlnode.Kind(n))
		return nil
	}
	var (
		unitNode, rpuNode, algNode, burstNode, windowNode, unlimitedNode, nameNode *yaml.Node
		multNode                                                                   *yaml.Node
		unit, name, windowText                                                     string
		rpu, burst, mult                                                           int64
		unlimited                                                                  bool
		alg                                                                        = ratelimit.FixedWindow
		window                                                                     time.Duration
		replaces                                                                   []string
		replaceLines                                                               []int
		bad                                                                        bool // a problem was reported
	)
	p.fields(n, path, map[string]func(k, v *yaml.Node){
		"unit": func(k, v *yaml.Node) { unitNode = v; unit, _ = p.str(v, yamlnode.Join(path, "unit")) },
		"requests_per_unit": func(k, v *yaml.Node) {
			rpuNode = v
			var good bool
			if rpu, good = p.integer(v, yamlnode.Join(path, "requests_per_unit"), 0, math.MaxUint32); !good {
				bad = true
			}
		},
		"unit_multiplier": func(k, v *yaml.Node) {
			// envoyproxy/ratelimit's number of units in the period (a
			// uint32 there; 0 is refused).
			multNode = v
			var good bool
			if mult, good = p.integer(v, yamlnode.Join(path, "unit_multiplier"), 1, math.MaxUint32); !good {
				bad = true
			}
		},
		"unlimited": func(k, v *yaml.Node) { unlimitedNode = v; unlimited = p.boolean(v, yamlnode.Join(path, "unlimited")) },
		"name":      func(k, v *yaml.Node) { nameNode = v; name, _ = p.str(v, yamlnode.Join(path, "name")) },
		"replaces": func(k, v *yaml.Node) {
			replaces, replaceLines = p.replacesList(v, yamlnode.Join(path, "replaces"))
		},
		"algorithm": func(k, v *yaml.Node) {
			algNode = v
			s, _ := p.str(v, yamlnode.Join(path, "algorithm"))
			a, err := ratelimit.ParseAlgorithm(s)
			if err != nil {
				p.add(v.Line, yamlnode.Join(path, "algorithm"), "unknown algorithm %q (want %s)", s, orList(algorithmNames()))
				bad = true
				return
			}
			alg = a
		},
		"burst": func(k, v *yaml.Node) {
			burstNode = v
			var good bool
			if burst, good = p.integer(v, yamlnode.Join(path, "burst"), 1, math.MaxInt64); !good {
				bad = true
			}
		},
		"window": func(k, v *yaml.Node) {
			windowNode = v
			s, _ := p.str(v, yamlnode.Join(path, "window"))
			windowText = s
			d, err := time.ParseDuration(s)
			switch {
			case err != nil || v.Tag != "!!str":
				p.add(v.Line, yamlnode.Join(path, "window"), "want a duration such as \"10s\" or \"1h30m\", got %s", yamlnode.Kind(v))
				bad = true
			case d <= 0:
				p.add(v.Line, yamlnode.Join(path, "window"), "window must be positive, got %s", s)
				bad = true
			case d > ratelimit.MaxWindow:
				p.add(v.Line, yamlnode.Join(path, "window"), "window %s is longer than the longest period sluice enforces (%s)", s, maxWindowText)
				bad = true
			default:
				window = d
			}
		},
	})

	r := &Rule{Replaces: replaces, Algorithm: ratelimit.FixedWindow}
	if nameNode != nil && name != "" {
		r.Name, r.explicitName = name, true
		if _, dup := p.names[name]; !dup {
			p.names[name] = nameNode.Line
		}
	}
	for i, rep := range replaces {
		rpath := fmt.Sprintf("%s.replaces[%d].name", path, i)
		switch {
		case rep == "":
			p.add(replaceLines[i], rpath, "should not have an empty replaces entry")
		case rep == name:
			p.add(replaceLines[i], rpath, "replaces should not contain name of same descriptor")
		default:
			p.replaces = append(p.replaces, replaceRef{name: rep, path: rpath, line: replaceLines[i]})
		}
	}

	if unlimited {
		r.Unlimited = true
		if unitNode != nil && unitKnown(unit) {
			p.add(unitNode.Line, yamlnode.Join(path, "unit"), "should not specify rate limit unit when unlimited")
		}
		for _, f := range []struct {
			n    *yaml.Node
			name string
		}{{algNode, "algorithm"}, {burstNode, "burst"}, {windowNode, "window"}} {
			if f.n != nil {
				p.add(f.n.Line, yamlnode.Join(path, f.name), "%s has no meaning when unlimited", f.name)
			}
		}
		return r
	}
	_ = unlimitedNode

	var period time.Duration
	switch {
	case windowNode != nil && unitNode != nil:
		p.add(windowNode.Line, yamlnode.Join(path, "window"), "give unit or window, not both")
		return nil
	case windowNode != nil && multNode != nil:
		p.add(multNode.Line, yamlnode.Join(path, "unit_multiplier"), "unit_multiplier multiplies unit, not window: give unit and unit_multiplier, or the whole period as window")
		return nil
	case windowNode != nil:
		if bad {
			return nil
		}
		period = window
	case unitNode == nil:
		p.add(n.Line, yamlnode.Join(path, "unit"), "missing unit (want %s; or a sluice window such as \"10s\")", unitNames())
		return nil
	default:
		d, known := unitDuration(unit)
		switch {
		case !known:
			p.add(unitNode.Line, yamlnode.Join(path, "unit"), "unknown unit %q (want %s)", unit, unitNames())
			return nil
		case d > ratelimit.MaxWindow:
			p.add(unitNode.Line, yamlnode.Join(path, "unit"), "unit %s is longer than the longest period sluice enforces (%s)", strings.ToLower(unit), maxWindowText)
			return nil
		case mult > 0 && time.Duration(mult) > ratelimit.MaxWindow/d:
			p.add(multNode.Line, yamlnode.Join(path, "unit_multiplier"), "unit_multiplier %d × %s is longer than the longest period sluice enforces (%s)", mult, strings.ToLower(unit), maxWindowText)
			return nil
		}
		// As envoyproxy/ratelimit: the period is unit × unit_multiplier,
		// a fixed window aligned to the Unix epoch in multiples of it.
		period = d * time.Duration(max(1, mult))
		r.Unit, r.UnitMultiplier = strings.ToLower(unit), uint32(mult)
	}
	if bad {
		return nil
	}
	if burstNode != nil && alg.Windowed() {
		if algNode == nil {
			p.add(burstNode.Line, yamlnode.Join(path, "burst"), "burst applies only to the bucket algorithms (gcra, token_bucket, leaky_bucket); with no algorithm the rule is a fixed_window, as in envoyproxy/ratelimit: set algorithm")
		} else {
			p.add(burstNode.Line, yamlnode.Join(path, "burst"), "burst applies only to the bucket algorithms (gcra, token_bucket, leaky_bucket), not %s", alg)
		}
		return nil
	}
	if period > ratelimit.MaxPeriod && !alg.Windowed() {
		// A year (envoyproxy/ratelimit's longest unit) is a window's period;
		// a bucket refilling over more than MaxPeriod is not enforced.
		node, field, what := unitNode, "unit", "unit "+strings.ToLower(unit)
		switch {
		case windowNode != nil:
			node, field, what = windowNode, "window", "window "+windowText
		case multNode != nil:
			node, field, what = multNode, "unit_multiplier", fmt.Sprintf("unit_multiplier %d × %s", mult, strings.ToLower(unit))
		}
		p.add(node.Line, yamlnode.Join(path, field), "%s is longer than %s enforces (%s); the window algorithms take up to %s: drop algorithm (a fixed window, as in envoyproxy/ratelimit) or use a window algorithm", what, alg, maxPeriodText, maxWindowText)
		return nil
	}
	if rpu > int64(period) && !alg.Windowed() {
		// envoyproxy/ratelimit accepts this (often as "no real limit") and
		// so do sluice's window algorithms, its default; the bucket
		// algorithms refill at most one event per nanosecond.
		p.add(rpuNode.Line, yamlnode.Join(path, "requests_per_unit"), "%d per %v is more than %s enforces: at most one event per nanosecond (%d per %v); use a window algorithm or unlimited: true", rpu, period, alg, int64(period), period)
		return nil
	}
	r.Algorithm = alg
	r.Limit = ratelimit.Limit{Rate: rpu, Period: period, Burst: burst}
	if err := r.Limit.Validate(); err != nil {
		p.add(n.Line, path, "%s", strings.TrimPrefix(err.Error(), "ratelimit: "))
		return nil
	}
	return r
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
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, path, "want a list of {name: …}, got %s", yamlnode.Kind(n))
		return nil, nil
	}
	var names []string
	var lines []int
	for i, e := range n.Content {
		e = p.deref(e)
		if e == nil {
			break
		}
		epath := fmt.Sprintf("%s[%d]", path, i)
		if e.Kind != yaml.MappingNode {
			p.add(e.Line, epath, "want a mapping with name, got %s", yamlnode.Kind(e))
			continue
		}
		name := ""
		p.fields(e, epath, map[string]func(k, v *yaml.Node){
			"name": func(k, v *yaml.Node) { name, _ = p.str(v, yamlnode.Join(epath, "name")) },
		})
		names = append(names, name)
		lines = append(lines, e.Line)
	}
	return names, lines
}

// quota parses sluice's quota block: {period: day|month, limit: N}.
func (p *parser) quota(n *yaml.Node, path string) *Rule {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want a mapping with period and limit, got %s", yamlnode.Kind(n))
		return nil
	}
	var periodNode, limitNode *yaml.Node
	var period string
	var limit int64
	ok := true
	p.fields(n, path, map[string]func(k, v *yaml.Node){
		"period": func(k, v *yaml.Node) { periodNode = v; period, _ = p.str(v, yamlnode.Join(path, "period")) },
		"limit": func(k, v *yaml.Node) {
			limitNode = v
			var good bool
			if limit, good = p.integer(v, yamlnode.Join(path, "limit"), 0, math.MaxInt64); !good {
				ok = false
			}
		},
	})
	switch {
	case periodNode == nil:
		p.add(n.Line, yamlnode.Join(path, "period"), "missing period (want day or month)")
		ok = false
	case period != QuotaDay && period != QuotaMonth:
		p.add(periodNode.Line, yamlnode.Join(path, "period"), "unknown quota period %q (want day or month)", period)
		ok = false
	}
	if limitNode == nil {
		p.add(n.Line, yamlnode.Join(path, "limit"), "missing limit")
		ok = false
	}
	if !ok {
		return nil
	}
	return &Rule{Quota: &Quota{Period: period, Limit: limit}, Algorithm: ratelimit.FixedWindow}
}
