package rules

import (
	"strings"
	"unsafe"
)

// Match returns the rule that entries match, or nil when none does. It
// follows envoyproxy/ratelimit (src/config/config_impl.go, GetLimit)
// exactly:
//
//   - entries are matched in order, one level of nested descriptors each;
//   - each entry is looked up by its composite key, key + "_" + value (the
//     '_' is written even for an empty value), against the composite keys
//     of the level's descriptors: key + "_" + value, or the key alone for a
//     descriptor without a value. At each level the descriptor whose
//     composite key equals the entry's wins; then the first wildcard
//     descriptor (a composite key containing '*'), in file order, whose
//     pattern matches the entry's composite key, each '*' matching any run
//     of bytes, the empty one included; then the descriptor whose composite
//     key is the entry's key alone;
//   - the rule is that of the descriptor the last entry reached, if it has a
//     rate_limit (or quota); a descriptor list shorter or longer than the
//     path to a rule matches nothing, and a level with no match ends the
//     walk with no rule.
//
// Because the composite keys are compared, an entry whose key contains
// '_' can match a descriptor of another key, as upstream.
//
// Match does not allocate unless an entry's key and value together exceed
// 256 bytes.
func (c *Config) Match(entries []Entry) *Rule {
	var buf [256]byte
	lvl := c.root
	for i, e := range entries {
		if lvl == nil {
			return nil
		}
		b := append(append(append(buf[:0], e.Key...), '_'), e.Value...)
		n := lvl.nodes[string(b)] // a nil map reads as empty; the conversion does not allocate
		if n == nil && len(lvl.wildcards) > 0 {
			s := unsafe.String(unsafe.SliceData(b), len(b)) // read only while b lives
			for _, w := range lvl.wildcards {
				if globMatch(w.parts, s) {
					n = w
					break
				}
			}
		}
		if n == nil {
			n = lvl.nodes[e.Key]
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

// globMatch reports whether s matches the pattern that parts is split from
// (strings.Split(pattern, "*")): each '*' matches any run of bytes, the
// empty one included, and the rest literally. Matching every literal part
// at its leftmost place is exact for patterns whose only metacharacter is
// '*'.
func globMatch(parts []string, s string) bool {
	switch len(parts) {
	case 0:
		return false
	case 1:
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
