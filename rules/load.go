package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LoadDir parses every *.yaml and *.yml file of dir (not its
// subdirectories; files whose name starts with a dot are skipped) and
// returns them as a Set. The error, when not nil, is an *Errors listing
// every problem of every file, including domains defined twice, or an
// error reading the directory.
func LoadDir(dir string) (*Set, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		if ext := filepath.Ext(n); ext == ".yaml" || ext == ".yml" {
			names = append(names, filepath.Join(dir, n))
		}
	}
	sort.Strings(names)
	return LoadFiles(names...)
}

// LoadFiles parses files and returns them as a Set, like LoadDir.
func LoadFiles(files ...string) (*Set, error) {
	var cfgs []*Config
	var errs Errors
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			errs = append(errs, Problem{File: name, Msg: err.Error()})
			continue
		}
		c, err := Parse(name, data)
		if err != nil {
			errs = append(errs, *err.(*Errors)...)
			continue
		}
		cfgs = append(cfgs, c)
	}
	s, err := NewSet(cfgs...)
	if err != nil {
		errs = append(errs, *err.(*Errors)...)
	}
	if len(errs) > 0 {
		return nil, &errs
	}
	return s, nil
}
