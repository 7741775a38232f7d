package gateway

import (
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/rules"
)

// decoder walks a gateway config's YAML node tree with yamlnode's walker
// (the rules files' walker: the same node budget, problem cap, merge keys
// and wording) and collects every problem as a rules.Problem
// ("file:line: path: message").
type decoder struct {
	file     string
	errs     rules.Errors
	readFile func(string) ([]byte, error)
	w        yamlnode.Walker
}

// walker returns d's walker, reporting into d.errs.
func (d *decoder) walker() *yamlnode.Walker {
	if d.w.Report == nil {
		d.w.Report = func(p yamlnode.Problem) {
			d.errs = append(d.errs, rules.Problem{File: d.file, Line: p.Line, Path: p.Path, Msg: p.Msg})
		}
	}
	return &d.w
}

func (d *decoder) read(name string) ([]byte, error) {
	if d.readFile != nil {
		return d.readFile(name)
	}
	return os.ReadFile(name)
}

func (d *decoder) add(line int, path, format string, args ...any) {
	d.walker().Addf(line, path, format, args...)
}

func (d *decoder) deref(n *yaml.Node) *yaml.Node { return d.walker().Deref(n) }

// fields calls the handler of each key of mapping n (see
// yamlnode.Walker.Fields).
func (d *decoder) fields(n *yaml.Node, path string, handlers map[string]func(k, v *yaml.Node)) {
	d.walker().Fields(n, path, handlers)
}

func (d *decoder) list(n *yaml.Node, path string, each func(i int, v *yaml.Node, path string)) {
	d.walker().List(n, path, each)
}

func (d *decoder) str(n *yaml.Node, path string) string {
	s, _ := d.walker().Str(n, path)
	return s
}

func (d *decoder) boolean(n *yaml.Node, path string) bool {
	b, _ := d.walker().Bool(n, path)
	return b
}

func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) int64 {
	v, _ := d.walker().Int(n, path, lo, hi)
	return v
}

// duration reads a positive Go duration string ("1m30s").
func (d *decoder) duration(n *yaml.Node, path string) time.Duration {
	v, _ := d.walker().Duration(n, path)
	return v
}
