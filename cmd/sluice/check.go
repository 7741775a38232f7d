package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

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
"file:line: path: message". A file with a top-level "domain" is a rules
file; any other is a gateway config. A directory is checked as a rules
directory (every *.yaml and *.yml in it, domains unique), as "sluice rls"
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
		set, err := rules.LoadDir(name)
		if err != nil {
			return errorLines(err), nil, ""
		}
		n := 0
		for _, d := range set.Domains() {
			n += len(set.Config(d).Rules())
		}
		return nil, nil, fmt.Sprintf("rules directory: %d %s, %d %s", len(set.Domains()), plural(len(set.Domains()), "domain"), n, plural(n, "rule"))
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return []string{err.Error()}, nil, ""
	}
	switch kind := fileKind(data); {
	case kind == "rules" || (kind == "unknown" && c.gateway == nil):
		cfg, err := rules.Parse(name, data)
		if err != nil {
			return errorLines(err), nil, ""
		}
		return nil, nil, fmt.Sprintf("rules: domain %s, %d %s", cfg.Domain, len(cfg.Rules()), plural(len(cfg.Rules()), "rule"))
	case c.gateway != nil:
		warnings, err := c.gateway(name, data)
		if err != nil {
			return errorLines(err), warnings, ""
		}
		return nil, warnings, "gateway config"
	}
	return []string{name + `: not a rules file (no top-level "domain"), and this build cannot check gateway configs`}, nil, ""
}

// fileKind tells a rules file (a mapping with a top-level domain) from
// anything else: "rules", "other", or "unknown" when the YAML does not
// parse.
func fileKind(data []byte) string {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return "other"
		}
		return "unknown"
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "other"
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "domain" {
			return "rules"
		}
	}
	return "other"
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
