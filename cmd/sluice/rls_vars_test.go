package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/rls/runner"
)

// TestUpstreamVarsFlags: every flag envoyproxy/ratelimit's variables map
// to (rls/runner's table) is one of sluice rls's, read from its --help.
func TestUpstreamVarsFlags(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"rls", "--help"}, io.Discard, &stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("rls --help: %v", err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(stderr.String(), -1) {
		names[m[1]] = true
	}
	if len(names) < 20 {
		t.Fatalf("read %d flags from rls --help:\n%s", len(names), stderr.String())
	}
	for f, vars := range runner.UpstreamVarsByFlag() {
		if !names[f] {
			t.Errorf("%v map to --%s, which sluice rls does not have", vars, f)
		}
	}
}
