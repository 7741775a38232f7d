package yamlnode

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func root(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	return doc.Content[0]
}

func problems(w *Walker) string {
	var b strings.Builder
	for _, p := range w.Problems {
		fmt.Fprintf(&b, "%d: %s: %s\n", p.Line, p.Path, p.Msg)
	}
	return b.String()
}

func expect(t *testing.T, w *Walker, want ...string) {
	t.Helper()
	got := problems(w)
	if got != strings.Join(want, "\n")+"\n" && !(got == "" && len(want) == 0) {
		t.Errorf("problems:\n%swant:\n%s", got, strings.Join(want, "\n"))
	}
}

// walkAll visits every node under n the way a decoder does, through
// Fields and List, down to a depth of 64 (as a decoder of a recursive
// format bounds its depth: the rules' descriptors).
func walkAll(w *Walker, n *yaml.Node, path string, depth int) (visits int) {
	visits = 1
	if depth > 64 {
		return visits
	}
	switch n.Kind {
	case yaml.SequenceNode:
		w.List(n, path, func(_ int, v *yaml.Node, p string) { visits += walkAll(w, v, p, depth+1) })
	case yaml.MappingNode:
		handlers := map[string]func(k, v *yaml.Node){}
		for i := 0; i+1 < len(n.Content); i += 2 {
			name := n.Content[i].Value
			handlers[name] = func(_, v *yaml.Node) { visits += walkAll(w, v, Join(path, name), depth+1) }
		}
		w.Fields(n, path, handlers)
	}
	return visits
}

// laughs is a billion laughs: ten copies of ten copies … of a small
// mapping, 10^levels mappings once the aliases are expanded.
func laughs(levels int, merge bool) string {
	var b strings.Builder
	b.WriteString("x:\n  l0: &l0 {a: 1, b: [1, 2]}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [", i, i)
		if merge {
			fmt.Fprintf(&b, "{<<: [")
		}
		for j := 0; j < 10; j++ {
			fmt.Fprintf(&b, "*l%d, ", i-1)
		}
		if merge {
			b.WriteString("]}")
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, "y: *l%d\n", levels)
	return b.String()
}

func TestAliasBombBounded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		src   string
		limit int
	}{
		{"lists", laughs(9, false), 0},
		{"lists, small budget", laughs(9, false), 5000},
		{"self reference", "a: &a [*a, *a, *a]\n", 20000},
		{"self merge", "a: &a {x: 1, <<: [*a, *a, *a]}\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := root(t, tt.src)
			// The work is counted, not timed: the nodes the walker
			// counted, and the values it handed to the handlers.
			w := &Walker{MaxNodes: tt.limit}
			visits := walkAll(w, n, "", 0)
			limit := tt.limit
			if limit == 0 {
				limit = MaxNodes
			}
			if w.nodes > limit+2 || visits > limit+2 {
				t.Errorf("counted %d nodes, handed %d values, budget %d", w.nodes, visits, limit)
			}
			too := 0
			for _, p := range w.Problems {
				if strings.HasPrefix(p.Msg, "file too large") {
					too++
					if want := fmt.Sprintf("file too large: more than %d YAML nodes once aliases are expanded", limit); p.Msg != want {
						t.Errorf("message %q, want %q", p.Msg, want)
					}
				}
			}
			switch {
			case tt.name == "self merge":
				// Bounded by the merge depth before the budget.
				if too != 0 || !strings.Contains(problems(w), "merge keys nested more than 8 deep") {
					t.Errorf("problems:\n%s\nwant merge depth only", problems(w))
				}
			case too != 1:
				t.Errorf("%d file too large problems, want 1:\n%s", too, problems(w))
			}
			if tt.name != "self merge" && (!w.Truncated() || w.Deref(n) != nil) {
				t.Errorf("after the budget: Truncated %v, Deref not nil", w.Truncated())
			}
		})
	}
}

func TestProblemCap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 250 {
		fmt.Fprintf(&b, "f%d: 1\n", i)
	}
	var w Walker
	n := root(t, b.String())
	w.Fields(n, "", map[string]func(k, v *yaml.Node){"known": func(k, v *yaml.Node) {}})
	if len(w.Problems) != MaxProblems+1 {
		t.Fatalf("%d problems, want %d", len(w.Problems), MaxProblems+1)
	}
	last := w.Problems[MaxProblems]
	if last != (Problem{Line: MaxProblems + 1, Msg: "too many problems: stopped after 100"}) {
		t.Errorf("last problem = %+v", last)
	}
	if !w.Truncated() || w.Deref(n) != nil {
		t.Error("after the cap: not Truncated, or Deref goes on")
	}
	w.Addf(1, "", "more")
	if len(w.Problems) != MaxProblems+1 {
		t.Error("Addf reported after the cap")
	}

	// The note is never before a problem it follows, so that sorting by
	// line (as both decoders do) keeps it last.
	w = Walker{MaxProblems: 2}
	w.Addf(9, "a", "x")
	w.Addf(3, "b", "y")
	w.Addf(5, "c", "z")
	expect(t, &w, "9: a: x", "3: b: y", "9: : too many problems: stopped after 2")
}

func TestMergeKeys(t *testing.T) {
	t.Parallel()
	src := `base: &base {a: base, b: base, c: base}
other: &other {b: other, d: other}
m:
  <<: [*base, *other]
  a: own
nested:
  <<: {<<: *base, c: mid}
bad:
  <<: [*base, 1]
  e: 3
worse:
  <<: x
`
	n := root(t, src)
	var w Walker
	got := map[string]map[string]string{}
	read := func(path string, v *yaml.Node) {
		got[path] = map[string]string{}
		w.Fields(v, path, map[string]func(k, v *yaml.Node){
			"a": func(k, v *yaml.Node) { got[path]["a"], _ = w.Str(v, "") },
			"b": func(k, v *yaml.Node) { got[path]["b"], _ = w.Str(v, "") },
			"c": func(k, v *yaml.Node) { got[path]["c"], _ = w.Str(v, "") },
			"d": func(k, v *yaml.Node) { got[path]["d"], _ = w.Str(v, "") },
		})
	}
	w.Fields(n, "", map[string]func(k, v *yaml.Node){
		"base":   func(k, v *yaml.Node) {},
		"other":  func(k, v *yaml.Node) {},
		"m":      func(k, v *yaml.Node) { read("m", v) },
		"nested": func(k, v *yaml.Node) { read("nested", v) },
		"bad":    func(k, v *yaml.Node) { read("bad", v) },
		"worse":  func(k, v *yaml.Node) { read("worse", v) },
	})
	want := map[string]map[string]string{
		// Own keys win; an earlier merged mapping wins over a later one.
		"m": {"a": "own", "b": "base", "c": "base", "d": "other"},
		// A merged mapping's own keys win over what it merges.
		"nested": {"a": "base", "b": "base", "c": "mid"},
		"bad":    {"a": "base", "b": "base", "c": "base"},
		"worse":  {},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fields = %v\nwant %v", got, want)
	}
	expect(t, &w,
		`9: bad.<<: want a mapping or a list of mappings to merge, got "1"`,
		`10: bad: unknown field "e" (did you mean "a"?)`,
		`12: worse.<<: want a mapping or a list of mappings to merge, got "x"`,
	)

	// A merged field with no handler is reported at its own line.
	w = Walker{}
	w.Fields(root(t, "x: &x {zzz: 1}\ny: {<<: *x}\n").Content[3], "y", map[string]func(k, v *yaml.Node){"alpha": nil})
	expect(t, &w, `1: y: unknown field "zzz" (want alpha)`)
}

func TestFieldsDuplicatesAndKeys(t *testing.T) {
	t.Parallel()
	src := `rate_limit: 1
unit: 2
rate_limit: 3
ratelimit: 4
zzz: 5
1: 6
[a]: 7
null: 8
`
	var w Walker
	calls := 0
	h := func(k, v *yaml.Node) { calls++ }
	w.Fields(root(t, src), "d", map[string]func(k, v *yaml.Node){"rate_limit": h, "unit": h, "key": h})
	expect(t, &w,
		"3: d.rate_limit: duplicate field (first at line 1)",
		`4: d: unknown field "ratelimit" (did you mean "rate_limit"?)`,
		`5: d: unknown field "zzz" (want key, rate_limit or unit)`,
		`6: d: unknown field "1" (want key, rate_limit or unit)`,
		`7: d: field name is a list, want a string`,
		`8: d: unknown field "null" (want key, rate_limit or unit)`,
	)
	if calls != 2 {
		t.Errorf("%d handler calls, want 2 (the first rate_limit, unit)", calls)
	}

	w = Walker{}
	w.Fields(root(t, "a: [1]\nb: ~\n").Content[1], "a", nil)
	w.Fields(root(t, "a: [1]\nb: ~\n").Content[3], "b", nil)
	expect(t, &w, "1: a: want a mapping, got a list")
}

func TestList(t *testing.T) {
	t.Parallel()
	n := root(t, "y: &y z\na: [x, *y]\nb: ~\nc: {}\n")
	var w Walker
	var got []string
	each := func(i int, v *yaml.Node, path string) { got = append(got, fmt.Sprint(i, path, v.Value)) }
	w.List(n.Content[3], "a", each)
	w.List(n.Content[5], "b", each)
	w.List(n.Content[7], "c", each)
	if fmt.Sprint(got) != "[0a[0]x 1a[1]z]" {
		t.Errorf("List visited %v", got)
	}
	expect(t, &w, "4: c: want a list, got a mapping")
}

func TestScalars(t *testing.T) {
	t.Parallel()
	src := `s: text
sn: 12
snull: ~
smap: {a: 1}
b1: yes
b2: "yes"
b3: TRUE
b4: off
b5:
b6: 1
i1: 0x10
i2: 11
i3: 1.5
d1: 1h30m
d2: 0s
d3: 10
`
	n := root(t, src)
	v := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		v[n.Content[i].Value] = n.Content[i+1]
	}
	var w Walker
	var got []string
	str := func(k string) { s, ok := w.Str(v[k], k); got = append(got, fmt.Sprintf("%s=%q/%v", k, s, ok)) }
	boo := func(k string) { b, ok := w.Bool(v[k], k); got = append(got, fmt.Sprintf("%s=%v/%v", k, b, ok)) }
	num := func(k string) { x, ok := w.Int(v[k], k, 0, 16); got = append(got, fmt.Sprintf("%s=%d/%v", k, x, ok)) }
	dur := func(k string) { d, ok := w.Duration(v[k], k); got = append(got, fmt.Sprintf("%s=%v/%v", k, d, ok)) }
	str("s")
	str("sn")
	str("snull")
	str("smap")
	for _, k := range []string{"b1", "b2", "b3", "b4", "b5", "b6"} {
		boo(k)
	}
	num("i1")
	num("i2")
	num("i3")
	dur("d1")
	dur("d2")
	dur("d3")
	want := `s="text"/true sn="12"/true snull=""/true smap=""/false ` +
		`b1=true/true b2=false/false b3=true/true b4=false/true b5=false/true b6=false/false ` +
		`i1=16/true i2=11/true i3=0/false ` +
		`d1=1h30m0s/true d2=0s/false d3=0s/false`
	if g := strings.Join(got, " "); g != want {
		t.Errorf("got  %s\nwant %s", g, want)
	}
	expect(t, &w,
		"4: smap: want a string, got a mapping",
		`6: b2: want true or false, got "yes"`,
		`10: b6: want true or false, got "1"`,
		`13: i3: want a whole number from 0 to 16, got "1.5"`,
		`15: d2: want a positive duration such as "30s" or "1h30m", got "0s"`,
		`16: d3: want a positive duration such as "30s" or "1h30m", got "10"`,
	)
}

func TestSyntaxError(t *testing.T) {
	t.Parallel()
	var w Walker
	var x any
	w.SyntaxError(yaml.Unmarshal([]byte("a: 1\n\tb: 2\n"), &x))
	if len(w.Problems) != 1 || w.Problems[0].Line != 2 || !strings.HasPrefix(w.Problems[0].Msg, "invalid YAML: ") {
		t.Errorf("problems: %s", problems(&w))
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	var got []Problem
	w := Walker{Report: func(p Problem) { got = append(got, p) }}
	w.Addf(3, "a.b", "want %s", "x")
	if len(got) != 1 || got[0] != (Problem{3, "a.b", "want x"}) || len(w.Problems) != 0 {
		t.Errorf("Report got %v, Problems %v", got, w.Problems)
	}
}

func TestOrList(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", "a b": "a or b", "a b c": "a, b or c"} {
		if got := OrList(strings.Fields(in)); got != want {
			t.Errorf("OrList(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRoot: the top-level mapping, or the one problem of a file that has
// none (bad YAML, empty, another kind at the top).
func TestRoot(t *testing.T) {
	t.Parallel()
	var w Walker
	if n := w.Root([]byte("a: 1\n"), "a"); n == nil || n.Kind != yaml.MappingNode {
		t.Fatalf("Root = %v, want the mapping", n)
	}
	expect(t, &w)
	for _, c := range []struct{ src, want string }{
		{"", "0: : empty file (want a and b)"},
		{"# only a comment\n", "0: : empty file (want a and b)"},
		{"- 1\n", "1: : want a mapping with a and b, got a list"},
		{"a: [\n", "1: : invalid YAML: did not find expected node content"},
	} {
		w = Walker{}
		if n := w.Root([]byte(c.src), "a and b"); n != nil {
			t.Errorf("Root(%q) = %v, want nil", c.src, n)
		}
		expect(t, &w, c.want)
	}
}
