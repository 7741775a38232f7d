package rules

import "strings"

// Match returns the rule that entries match, or nil when none does. It
// follows envoyproxy/ratelimit exactly:
//
//   - entries are matched in order, one level of nested descriptors each;
//   - at each level a descriptor with the entry's key and exact value wins,
//     then the first wildcard descriptor (value ending in '*') of that key
//     whose prefix the value has, in file order, then the descriptor with
//     the key and no value;
//   - the rule is that of the descriptor the last entry reached, if it has a
//     rate_limit (or quota); a descriptor list shorter or longer than the
//     path to a rule matches nothing, and a level with no match ends the
//     walk with no rule.
//
// Match does not allocate.
func (c *Config) Match(entries []Entry) *Rule {
	lvl := c.root
	for i, e := range entries {
		if lvl == nil {
			return nil
		}
		n := lvl.exact[e] // a nil map reads as empty
		if n == nil {
			for _, w := range lvl.wildcards {
				if w.key == e.Key && strings.HasPrefix(e.Value, w.prefix) {
					n = w
					break
				}
			}
		}
		if n == nil {
			n = lvl.keyOnly[e.Key]
		}
		if n == nil {
			return nil
		}
		if i == len(entries)-1 {
			return n.rule
		}
		lvl = n.children
	}
	return nil
}
