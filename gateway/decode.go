package gateway

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/didyoumean"
	"github.com/sluicehq/sluice/internal/yamlnode"
	"github.com/sluicehq/sluice/rules"
)

// decoder walks a YAML node tree and collects every problem as a
// rules.Problem ("file:line: path: message").
type decoder struct {
	file     string
	errs     rules.Errors
	nodes    int
	readFile func(string) ([]byte, error)
}

func (d *decoder) read(name string) ([]byte, error) {
	if d.readFile != nil {
		return d.readFile(name)
	}
	return os.ReadFile(name)
}

const maxNodes = 1 << 18

func (d *decoder) add(line int, path, format string, args ...any) {
	d.errs = append(d.errs, rules.Problem{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) yamlError(err error) {
	line, msg := yamlnode.ErrorLine(err)
	d.add(line, "", "invalid YAML: %s", msg)
}

func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.add(0, "", "file too large: more than %d YAML nodes once aliases are expanded", maxNodes)
		}
		return nil
	}
	return n
}

// fields calls the handler of each key of mapping n and reports unknown,
// duplicate and non-string keys.
func (d *decoder) fields(n *yaml.Node, path string, handlers map[string]func(k, v *yaml.Node)) {
	if n = d.deref(n); n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, path, "want a mapping, got %s", yamlnode.Kind(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], d.deref(n.Content[i+1])
		if v == nil {
			return
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			d.add(k.Line, path, "field name is %s, want a string", yamlnode.Kind(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, yamlnode.Join(path, k.Value), "duplicate field (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		h, ok := handlers[k.Value]
		if !ok {
			known := make([]string, 0, len(handlers))
			for name := range handlers {
				known = append(known, name)
			}
			sort.Strings(known)
			if best := didyoumean.Closest(k.Value, known); best != "" {
				d.add(k.Line, path, "unknown field %q (did you mean %q?)", k.Value, best)
				continue
			}
			d.add(k.Line, path, "unknown field %q (want one of %s)", k.Value, strings.Join(known, ", "))
			continue
		}
		h(k, v)
	}
}

func (d *decoder) list(n *yaml.Node, path string, each func(i int, v *yaml.Node, path string)) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.add(n.Line, path, "want a list, got %s", yamlnode.Kind(n))
		return
	}
	for i, v := range n.Content {
		if v = d.deref(v); v == nil {
			return
		}
		each(i, v, fmt.Sprintf("%s[%d]", path, i))
	}
}

func (d *decoder) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode {
		d.add(n.Line, path, "want a string, got %s", yamlnode.Kind(n))
		return ""
	}
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

func (d *decoder) boolean(n *yaml.Node, path string) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b
		}
	}
	d.add(n.Line, path, "want true or false, got %s", yamlnode.Kind(n))
	return false
}

func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) int64 {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil && v >= lo && v <= hi {
			return v
		}
	}
	d.add(n.Line, path, "want a whole number from %d to %d, got %s", lo, hi, yamlnode.Kind(n))
	return 0
}

// duration reads a Go duration string ("1m30s"), positive.
func (d *decoder) duration(n *yaml.Node, path string) time.Duration {
	s := d.str(n, path)
	if n.Kind != yaml.ScalarNode {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		d.add(n.Line, path, "want a positive duration such as \"30s\" or \"1m\", got %s", yamlnode.Kind(n))
		return 0
	}
	return v
}
