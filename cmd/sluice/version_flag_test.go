package main

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// TestVersionFlagEveryCommand: every command takes --version (and
// -version), prints what sluice version prints and does nothing else:
// sluice rls --version does not need --config-dir, nor fetch a URL.
func TestVersionFlagEveryCommand(t *testing.T) {
	t.Parallel()
	var want bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &want, io.Discard); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{{"sim", "--version"}, {"sim", "brooker", "--version"}, {"serve", "--config", "missing.yaml", "--version"}}
	for _, c := range commands() {
		cases = append(cases, []string{c.name, "--version"}, []string{c.name, "-version"})
	}
	for _, args := range cases {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		if code := exitCode(err, false, io.Discard); code != 0 || out.String() != want.String() || errOut.Len() != 0 {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want exit 0, %q", args, code, out.String(), errOut.String(), want.String())
		}
	}
}
