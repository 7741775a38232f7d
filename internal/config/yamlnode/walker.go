package yamlnode

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/didyoumean"
)

// The limits of a Walker whose fields are zero. They are the same for
// every config format sluice reads.
const (
	// MaxNodes bounds the nodes a walk visits, aliases expanded: a YAML
	// alias can repeat a subtree, and a few aliases of aliases make an
	// exponential tree out of a small file ("billion laughs").
	MaxNodes = 1 << 20
	// MaxProblems bounds the problems reported for one file.
	MaxProblems = 100
	// maxMergeDepth bounds merge keys that merge maps that merge maps.
	maxMergeDepth = 8
)

// A Problem is one thing wrong in a file: its line (1-based, 0 when
// unknown), the path of the field ("routes[0].cost", "" for the whole
// file) and a message.
type Problem struct {
	Line int
	Path string
	Msg  string
}

// A Walker reads a yaml.v3 node tree for a decoder and collects every
// problem it finds instead of stopping at the first. Its methods read one
// node each (Fields, List, Str, Bool, Int, Duration) and report what is
// wrong with it as "want …, got …"; Deref counts the nodes visited
// against a budget. The zero Walker is ready to use.
//
// A Walker stops after MaxProblems problems: it reports one more,
// "too many problems: stopped after N", at a line no earlier than any
// problem before it (so that sorting by line keeps it last), and from then
// on Deref returns nil and Addf reports nothing.
type Walker struct {
	// Report, when not nil, receives each problem as it is found;
	// otherwise problems are appended to Problems.
	Report   func(Problem)
	Problems []Problem

	// MaxNodes and MaxProblems replace the package's limits when positive.
	MaxNodes    int
	MaxProblems int

	nodes, problems, lastLine int
	tooBig, truncated         bool
}

func (w *Walker) maxNodes() int {
	if w.MaxNodes > 0 {
		return w.MaxNodes
	}
	return MaxNodes
}

func (w *Walker) maxProblems() int {
	if w.MaxProblems > 0 {
		return w.MaxProblems
	}
	return MaxProblems
}

// Truncated reports whether the walker stopped: too many problems, or a
// file larger than its node budget.
func (w *Walker) Truncated() bool { return w.truncated || w.tooBig }

// Addf reports a problem at line and path, unless the walker stopped
// (see Truncated).
func (w *Walker) Addf(line int, path, format string, args ...any) {
	if w.truncated || w.tooBig {
		return
	}
	if limit := w.maxProblems(); w.problems >= limit {
		w.truncated = true
		w.report(Problem{Line: max(line, w.lastLine), Msg: fmt.Sprintf("too many problems: stopped after %d", limit)})
		return
	}
	w.problems++
	w.lastLine = max(w.lastLine, line)
	w.report(Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (w *Walker) report(p Problem) {
	if w.Report != nil {
		w.Report(p)
		return
	}
	w.Problems = append(w.Problems, p)
}

// SyntaxError reports an error of yaml.Unmarshal as "invalid YAML: …" at
// the line it names.
func (w *Walker) SyntaxError(err error) {
	line, msg := ErrorLine(err)
	w.Addf(line, "", "invalid YAML: %s", msg)
}

// Root parses data and returns its top-level mapping, or nil after
// reporting why there is none: YAML that does not parse, an empty file
// ("empty file (want WANT)") or a top level that is not a mapping
// ("want a mapping with WANT, got …"). want names what the file holds at
// the least, such as "domain and descriptors".
func (w *Walker) Root(data []byte, want string) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		w.SyntaxError(err)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		w.Addf(0, "", "empty file (want %s)", want)
		return nil
	}
	root := w.Deref(doc.Content[0])
	if root != nil && root.Kind != yaml.MappingNode {
		w.Addf(root.Line, "", "want a mapping with %s, got %s", want, Kind(root))
		return nil
	}
	return root
}

// want is n with its aliases followed when it is a node of kind, nil when
// it is missing or null (nothing to walk) or after reporting "want WHAT,
// got …" when it is another kind.
func (w *Walker) want(n *yaml.Node, path string, kind yaml.Kind, what string) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		n = w.Deref(n)
	}
	if n == nil || IsNull(n) {
		return nil
	}
	if n.Kind != kind {
		w.Addf(n.Line, path, "want %s, got %s", what, Kind(n))
		return nil
	}
	return n
}

// Deref follows n's aliases and counts the node against the budget. It
// returns nil when the walk must stop: the budget is spent or the walker
// stopped after too many problems. A spent budget is reported once, as
// "file too large", and is the last problem reported: what a decoder
// finds missing in a walk cut short is not a problem of the file.
func (w *Walker) Deref(n *yaml.Node) *yaml.Node {
	if w.truncated || w.tooBig {
		return nil
	}
	w.nodes++
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
		w.nodes++
	}
	if w.nodes > w.maxNodes() {
		w.Addf(0, "", "file too large: more than %d YAML nodes once aliases are expanded", w.maxNodes())
		w.tooBig = true
		return nil
	}
	return n
}

// IsNull reports whether n is a YAML null ("~", "null" or nothing).
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// field is one key and value of a mapping, merged when it comes from a
// merge key.
type field struct {
	k, v   *yaml.Node
	merged bool
}

// Fields calls the handler of each key of mapping n with the key and its
// value (aliases followed), in file order. A null n has no fields; any
// other non-mapping is reported.
//
// It reports, without calling a handler: a key given twice ("duplicate
// field (first at line N)"), a key that is not a scalar ("field name is a
// mapping, want a string"), and a key with no handler, including a scalar
// that YAML reads as a number, a boolean or null ("unknown field "x"",
// with the closest known field as "did you mean", else the list of
// known fields).
//
// Merge keys ("<<: *base", or a list of aliases) are expanded as yaml.v3
// does when it decodes into a struct: the mapping's own keys win over
// merged ones, and an earlier merged mapping wins over a later one. A
// merged key that is overridden is not a duplicate; a merged key with no
// handler is reported like any other, at its own line.
func (w *Walker) Fields(n *yaml.Node, path string, handlers map[string]func(k, v *yaml.Node)) {
	if n = w.want(n, path, yaml.MappingNode, "a mapping"); n == nil {
		return
	}
	var fields []field
	w.collect(n, path, false, 0, &fields)
	seen := map[string]int{}
	for _, f := range fields {
		if f.k.Kind != yaml.ScalarNode {
			w.Addf(f.k.Line, path, "field name is %s, want a string", Kind(f.k))
			continue
		}
		name := f.k.Value
		if first, dup := seen[name]; dup {
			if !f.merged {
				w.Addf(f.k.Line, Join(path, name), "duplicate field (first at line %d)", first)
			}
			continue
		}
		seen[name] = f.k.Line
		h, ok := handlers[name]
		if !ok || f.k.Tag != "!!str" {
			w.Addf(f.k.Line, path, "unknown field %q%s", name, suggest(name, handlers))
			continue
		}
		h(f.k, f.v)
	}
}

// collect appends m's keys and values to out, its own before those it
// merges, and the mappings it merges in order. It returns false when the
// walk must stop.
func (w *Walker) collect(m *yaml.Node, path string, merged bool, depth int, out *[]field) bool {
	var sources []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], w.Deref(m.Content[i+1])
		if k.Kind == yaml.AliasNode {
			k = w.Deref(k)
		}
		if k == nil || v == nil {
			return false
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!merge" {
			*out = append(*out, field{k, v, merged})
			continue
		}
		switch v.Kind {
		case yaml.MappingNode:
			sources = append(sources, v)
		case yaml.SequenceNode:
			for _, e := range v.Content {
				if e = w.Deref(e); e == nil {
					return false
				}
				if e.Kind != yaml.MappingNode {
					w.Addf(e.Line, Join(path, "<<"), "want a mapping or a list of mappings to merge, got %s", Kind(e))
					continue
				}
				sources = append(sources, e)
			}
		default:
			w.Addf(v.Line, Join(path, "<<"), "want a mapping or a list of mappings to merge, got %s", Kind(v))
		}
	}
	for _, s := range sources {
		if depth >= maxMergeDepth {
			w.Addf(s.Line, Join(path, "<<"), "merge keys nested more than %d deep", maxMergeDepth)
			continue
		}
		if !w.collect(s, path, true, depth+1, out) {
			return false
		}
	}
	return true
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
	return " (want " + OrList(known) + ")"
}

// List calls each with every element of list n (aliases followed) and its
// path, "path[i]". A null n is an empty list; any other non-list is
// reported as "want a list, got …".
func (w *Walker) List(n *yaml.Node, path string, each func(i int, v *yaml.Node, path string)) {
	if n = w.want(n, path, yaml.SequenceNode, "a list"); n == nil {
		return
	}
	for i, v := range n.Content {
		if v = w.Deref(v); v == nil {
			return
		}
		each(i, v, fmt.Sprintf("%s[%d]", path, i))
	}
}

// Str reads a scalar as a string: a number or a boolean is its text (as
// yaml.v2 and envoyproxy/ratelimit read it), null is "".
func (w *Walker) Str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		w.Addf(n.Line, path, "want a string, got %s", Kind(n))
		return "", false
	}
	if IsNull(n) {
		return "", true
	}
	return n.Value, true
}

// Bool reads true or false, in any case, and YAML 1.1's unquoted yes, no,
// y, n, on and off (which yaml.v2, and so envoyproxy/ratelimit, read as
// booleans; yaml.v3 reads them as strings). Null is false.
func (w *Walker) Bool(n *yaml.Node, path string) (bool, bool) {
	if n.Kind == yaml.ScalarNode {
		plain := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0
		switch strings.ToLower(n.Value) {
		case "true", "yes", "y", "on":
			if plain {
				return true, true
			}
		case "false", "no", "n", "off":
			if plain {
				return false, true
			}
		}
		if IsNull(n) {
			return false, true
		}
	}
	w.Addf(n.Line, path, "want true or false, got %s", Kind(n))
	return false, false
}

// Int reads a whole number in [lo, hi].
func (w *Walker) Int(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil && v >= lo && v <= hi {
			return v, true
		}
	}
	w.Addf(n.Line, path, "want a whole number from %d to %d, got %s", lo, hi, Kind(n))
	return 0, false
}

// Duration reads a positive Go duration ("30s", "1h30m").
func (w *Walker) Duration(n *yaml.Node, path string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if d, err := time.ParseDuration(n.Value); err == nil && d > 0 {
			return d, true
		}
	}
	w.Addf(n.Line, path, "want a positive duration such as \"30s\" or \"1h30m\", got %s", Kind(n))
	return 0, false
}

// OrList formats ["a", "b", "c"] as "a, b or c".
func OrList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
