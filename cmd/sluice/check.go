package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/rules"
)

// checker is sluice check. gateway validates a sluice gateway config (the
// format of package gateway) and returns its warnings, each a line of
// "file:line: path: warning: message"; its error should be a
// *rules.Errors, or lines of "file:line: path: message". When nil, files
// that are not envoyproxy/ratelimit rules files are reported as such.
type checker struct {
	gateway func(filename string, data []byte) (warnings []string, err error)
}

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return checker{gateway: checkGateway}.run(ctx, args, stdout, stderr)
}

func (c checker) run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", "FILE|DIR...", stderr)
	quiet := fs.Bool("q", false, "print problems only, not a line per valid file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sluice check [-q] FILE|DIR...

Validates sluice gateway configs and envoyproxy/ratelimit rules files
without starting anything, and prints every problem as
"file:line: path: message": everything "sluice serve" would refuse at
start (the config, its listen addresses, the key files it names). A file
with a top-level "upstream" or "routes" is a gateway config; else one with
a top-level "domain" or "descriptors" is a rules file; the ok line says
which was assumed. A directory holding gateway configs has each checked
as one; its rules files, and any other directory's *.yaml and *.yml, are
checked together as a rules directory (domains unique), as "sluice rls"
and envoyproxy/ratelimit load one.

A gateway config's warnings (a rate limit action reading a header that
Go's server never shows a handler, or a hop-by-hop one) are printed as
"file:line: path: warning: message" but do not fail the check.

Exit status: 0 when every file is valid, 1 when there is a problem, 2 for
bad usage.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no files to check", errUsage)
	}
	problems, bad := 0, 0
	for _, name := range fs.Args() {
		lines, warnings, summary := c.checkPath(name)
		for _, l := range append(lines, warnings...) {
			fmt.Fprintln(stdout, l)
		}
		if len(lines) > 0 {
			problems += len(lines)
			bad++
		} else if !*quiet {
			if len(warnings) > 0 {
				summary += fmt.Sprintf(", %d %s", len(warnings), plural(len(warnings), "warning"))
			}
			fmt.Fprintf(stdout, "ok  %s (%s)\n", name, summary)
		}
	}
	if problems > 0 {
		return fmt.Errorf("check: %d %s in %d of %d %s", problems, plural(problems, "problem"), bad, fs.NArg(), plural(fs.NArg(), "argument"))
	}
	return nil
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// checkPath checks one file or directory and returns its problems and
// warnings, one a line, and a summary of what it holds.
func (c checker) checkPath(name string) (problems, warnings []string, summary string) {
	st, err := os.Stat(name)
	if err != nil {
		return []string{err.Error()}, nil, ""
	}
	if st.IsDir() {
		return c.checkDir(name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return []string{err.Error()}, nil, ""
	}
	return c.checkFile(name, data)
}

// checkFile checks one file as what its content says it is.
func (c checker) checkFile(name string, data []byte) (problems, warnings []string, summary string) {
	kind, why := fileKind(data)
	if kind != "rules" && c.gateway == nil {
		return []string{name + `: not a rules file (no top-level "domain" or "descriptors"), and this build cannot check gateway configs`}, nil, ""
	}
	if kind == "rules" {
		cfg, err := rules.Parse(name, data)
		if err != nil {
			return errorLines(err), nil, ""
		}
		return nil, ruleWarnings(cfg.Warnings()), fmt.Sprintf("rules: domain %s, %d %s", cfg.Domain, len(cfg.Rules()), plural(len(cfg.Rules()), "rule"))
	}
	warnings, err := c.gateway(name, data)
	if err != nil {
		lines := errorLines(err)
		if kind == "unknown" {
			// Say what the messages assume, without counting it.
			warnings = append(warnings, fmt.Sprintf("%s: note: checked as a gateway config (%s)", name, why))
		}
		return lines, warnings, ""
	}
	if kind == "unknown" {
		return nil, warnings, "gateway config: " + why
	}
	return nil, warnings, "gateway config"
}

// ruleWarnings are a rules file's warnings (a deprecated spelling), each
// a line "file:line: path: warning: message".
func ruleWarnings(ps []rules.Problem) []string {
	var out []string
	for _, p := range ps {
		p.Msg = "warning: " + p.Msg
		out = append(out, p.Error())
	}
	return out
}

// checkDir checks a directory's *.yaml and *.yml files: as one rules
// directory ("sluice rls --config-dir") when none is a gateway config,
// else each gateway config on its own and the rules files together.
func (c checker) checkDir(dir string) (problems, warnings []string, summary string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return []string{err.Error()}, nil, ""
	}
	var gateways, ruleFiles []string
	datas := map[string][]byte{}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		if ext := filepath.Ext(n); ext != ".yaml" && ext != ".yml" {
			continue
		}
		name := filepath.Join(dir, n)
		data, err := os.ReadFile(name)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if kind, _ := fileKind(data); kind == "gateway" && c.gateway != nil {
			gateways = append(gateways, name)
			datas[name] = data
		} else {
			ruleFiles = append(ruleFiles, name)
		}
	}
	sort.Strings(gateways)
	sort.Strings(ruleFiles)
	var parts []string
	if len(gateways) > 0 {
		for _, name := range gateways {
			p, w, _ := c.checkFile(name, datas[name])
			problems = append(problems, p...)
			warnings = append(warnings, w...)
		}
		parts = append(parts, fmt.Sprintf("%d gateway %s", len(gateways), plural(len(gateways), "config")))
	}
	if len(ruleFiles) > 0 || len(gateways) == 0 {
		set, err := rules.LoadFiles(ruleFiles...)
		if err != nil {
			problems = append(problems, errorLines(err)...)
		} else {
			warnings = append(warnings, ruleWarnings(set.Warnings())...)
			n := 0
			for _, d := range set.Domains() {
				n += len(set.Config(d).Rules())
			}
			parts = append(parts, fmt.Sprintf("rules directory: %d %s, %d %s", len(set.Domains()), plural(len(set.Domains()), "domain"), n, plural(n, "rule")))
		}
	}
	if len(problems) > 0 {
		return problems, warnings, ""
	}
	return nil, warnings, strings.Join(parts, "; ")
}

// fileKind tells a rules file from a gateway config by its top-level keys:
// upstream or routes make a gateway config; otherwise domain or descriptors
// make a rules file. kind is "rules", "gateway" or "unknown" (neither, or
// not YAML); why says what decided it.
func fileKind(data []byte) (kind, why string) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return "unknown", "the file is empty"
		}
		return "unknown", "the file is not valid YAML"
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "unknown", "the file is not a mapping"
	}
	var gw, rl []string
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch k := m.Content[i].Value; k {
		case "upstream", "routes":
			gw = append(gw, k)
		case "domain", "descriptors":
			rl = append(rl, k)
		}
	}
	switch {
	case len(gw) > 0:
		return "gateway", "by its top-level " + strings.Join(gw, " and ")
	case len(rl) > 0:
		return "rules", "by its top-level " + strings.Join(rl, " and ")
	}
	return "unknown", `no top-level upstream or routes (a gateway config's) nor domain or descriptors (a rules file's)`
}

// checkGateway validates a gateway config offline for sluice check, as
// serve would refuse it, without opening the store or listening: it
// parses it (header names included), checks its listen addresses and
// reads the files it names, and reports every problem found, each with
// the config's file and line.
func checkGateway(filename string, data []byte) (warnings []string, err error) {
	cfg, perr := gateway.Parse(filename, data)
	c := &gatewayCheck{filename: filename}
	if perr != nil {
		var pe *rules.Errors
		if !errors.As(perr, &pe) {
			return nil, perr
		}
		c.errs = append(c.errs, *pe...)
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		c.root = doc.Content[0]
	}
	c.addrs()
	filesOK := c.files(cfg)
	if cfg != nil && filesOK && len(c.errs) == 0 {
		c.resolver(cfg)
	}
	if len(c.errs) > 0 {
		errs := c.errs
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, &errs
	}
	return c.warnings(cfg), nil
}

// gatewayCheck collects the problems checkGateway finds in the config
// filename, whose YAML tree is root (nil when it is not a mapping).
type gatewayCheck struct {
	filename string
	root     *yaml.Node
	errs     rules.Errors
}

func (c *gatewayCheck) bad(n *yaml.Node, path, format string, a ...any) {
	c.errs = append(c.errs, rules.Problem{File: c.filename, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, a...)})
}

// addrs checks the listen addresses: net.Listen would refuse these when
// serve starts.
func (c *gatewayCheck) addrs() {
	for _, key := range []string{"listen", "admin_listen"} {
		if n := yamlAt(c.root, key); n != nil && n.Kind == yaml.ScalarNode {
			if err := checkAddr(n.Value); err != nil {
				c.bad(n, key, "%v", err)
			}
		}
	}
}

// files checks that each file the config names is readable, whatever
// else is wrong (and, when the config did not parse, that the API key
// file does); false if one is not.
func (c *gatewayCheck) files(cfg *gateway.Config) bool {
	ok := true
	dir := filepath.Dir(c.filename)
	for _, path := range [][]string{{"identity", "api_keys_file"}, {"identity", "jwt", "key_file"}} {
		n := yamlAt(c.root, path...)
		if n == nil || n.Kind != yaml.ScalarNode || n.Value == "" {
			continue
		}
		name := n.Value
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		keys, err := os.ReadFile(name)
		if err == nil && path[1] == "api_keys_file" && cfg == nil {
			_, err = identity.ParseKeyFile(name, keys) // else Resolver parses it below
		}
		if err != nil {
			ok = false
			for _, l := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
				c.bad(n, strings.Join(path, "."), "%s", l)
			}
		}
	}
	return ok
}

// resolver builds the config's identity resolver as serve would, and
// reports its error at the line of the setting it names.
func (c *gatewayCheck) resolver(cfg *gateway.Config) {
	_, err := gateway.Resolver(cfg)
	if err == nil {
		return
	}
	// "gateway: FILE: identity.x: message": put it at its line.
	msg := strings.TrimPrefix(err.Error(), "gateway: "+cfg.File+": ")
	path, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		path, rest = "identity", msg
	}
	n := yamlAt(c.root, strings.Split(path, ".")...)
	if n == nil {
		n = yamlAt(c.root, "identity")
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	for _, l := range strings.Split(strings.TrimRight(rest, "\n"), "\n") {
		c.errs = append(c.errs, rules.Problem{File: c.filename, Line: line, Path: path, Msg: l})
	}
}

// warnings are the config's own, and a snapshot directory that does not
// exist: serve starts without it but cannot save the counters into it
// when it stops.
func (c *gatewayCheck) warnings(cfg *gateway.Config) []string {
	warnings := cfg.Warnings
	if n := yamlAt(c.root, "snapshot", "file"); n != nil && cfg.SnapshotFile != "" {
		d := filepath.Dir(cfg.SnapshotFile)
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			warnings = append(warnings, rules.Problem{File: c.filename, Line: n.Line, Path: "snapshot.file",
				Msg: fmt.Sprintf("warning: directory %s does not exist: the counters cannot be saved there when serve stops", d)}.Error())
		}
	}
	return warnings
}

// checkAddr checks a listen address as net.Listen("tcp", addr) would.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("%q: %s: want HOST:PORT, such as 127.0.0.1:8080 or :8080", addr, ae.Err)
		}
		return fmt.Errorf("%q: want HOST:PORT: %v", addr, err)
	}
	if port == "" {
		return nil // any free port, as net.Listen
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return fmt.Errorf("%q: port %d is out of range (0 to 65535)", addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: unknown port %q", addr, port)
	}
	return nil
}

// yamlAt returns the value node at the mapping keys path under n, or nil.
func yamlAt(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// errorLines splits an error into its problems: the entries of a
// *rules.Errors, else its lines.
func errorLines(err error) []string {
	var errs *rules.Errors
	if errors.As(err, &errs) {
		out := make([]string, len(*errs))
		for i, p := range *errs {
			out[i] = p.Error()
		}
		return out
	}
	return strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
}
