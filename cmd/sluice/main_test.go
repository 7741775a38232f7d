package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestUsageErrorsSpeak: every usage error prints its message and then the
// command's usage on stderr, once, and is errUsage (exit status 2).
func TestUsageErrorsSpeak(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		msg, text string // msg on stderr, then the usage containing text
	}{
		{[]string{"fetch", "example.com/page"}, `sluice fetch: not an http(s) URL: "example.com/page"`, "Usage: sluice fetch"},
		{[]string{"fetch"}, "sluice fetch: no URLs", "Usage: sluice fetch"},
		{[]string{"fetch", "--rate", "-5", "http://x/"}, "sluice fetch: --rate -5: want 0 (adaptive) or more", "Usage: sluice fetch"},
		{[]string{"fetch", "--backoff", "foo", "http://x/"}, `sluice fetch: unknown --backoff "foo"`, "Usage: sluice fetch"},
		{[]string{"fetch", "--concurrency", "0", "http://x/"}, "sluice fetch: --concurrency 0: want at least 1", "Usage: sluice fetch"},
		{[]string{"fetch", "--nope", "http://x/"}, "flag provided but not defined: -nope", "Usage: sluice fetch"},
		{[]string{"rls", "--config-dir", ".", "--headers", "bogus"}, "sluice rls: ", "Usage: sluice rls"},
		{[]string{"rls"}, "sluice rls: --config-dir is required", "Usage: sluice rls"},
		{[]string{"rls", "--config-dir", ".", "--max-connections", "0"}, "sluice rls: --max-connections 0: want at least 1", "Usage: sluice rls"},
		{[]string{"rls", "--config-dir", ".", "--max-keys", "-1"}, "sluice rls: --max-keys -1: want 1024 to", "Usage: sluice rls"},
		{[]string{"rls", "--config-dir", ".", "--key-prefix", "a{b"}, `sluice rls: --key-prefix "a{b": no '{' or '}'`, "Usage: sluice rls"},
		{[]string{"rls", "--config-dir", ".", "extra"}, `sluice rls: unexpected arguments ["extra"]`, "Usage: sluice rls"},
		{[]string{"serve", "extra"}, `sluice serve: unexpected arguments ["extra"]`, "Usage: sluice serve"},
		{[]string{"serve", "--watch-interval", "0s"}, "sluice serve: --watch-interval 0s is not positive", "Usage: sluice serve"},
		{[]string{"serve", "--heap-floor-mib", "-1"}, "sluice serve: --heap-floor-mib -1: want 0 to 16384", "Usage: sluice serve"},
		{[]string{"serve", "--gc-percent", "-5"}, "sluice serve: --gc-percent -5 is negative", "Usage: sluice serve"},
		{[]string{"check"}, "sluice check: no files to check", "Usage: sluice check"},
		{[]string{"sim", "objectstore", "--requests", "-1"}, "sluice sim objectstore: --requests -1: want at least 1", "Usage: sluice sim objectstore"},
		{[]string{"nosuch"}, `sluice: unknown command "nosuch"`, "Commands:"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want errUsage", tc.args, err)
			continue
		}
		if code := exitCode(err, false, &bytes.Buffer{}); code != 2 {
			t.Errorf("run(%q): exit status %d, want 2", tc.args, code)
		}
		got := stderr.String()
		i, j := strings.Index(got, tc.msg), strings.Index(got, tc.text)
		if i < 0 || j < i {
			t.Errorf("run(%q) stderr:\n%s\nwant %q followed by the usage (%q)", tc.args, got, tc.msg, tc.text)
		}
		if n := strings.Count(got, tc.text); n != 1 {
			t.Errorf("run(%q) printed the usage %d times:\n%s", tc.args, n, got)
		}
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err         error
		interrupted bool
		want        int
		stderr      string
	}{
		{nil, false, 0, ""},
		{nil, true, 0, ""},
		{flag.ErrHelp, false, 0, ""},
		{shown(errUsage), false, 2, ""},
		{errors.New("boom"), false, 1, "sluice: boom\n"},
		{errors.New("fetch interrupted: 1 of 3 URLs done"), true, 130, "sluice: fetch interrupted: 1 of 3 URLs done\n"},
	} {
		var stderr bytes.Buffer
		if got := exitCode(tc.err, tc.interrupted, &stderr); got != tc.want || stderr.String() != tc.stderr {
			t.Errorf("exitCode(%v, %v) = %d, printed %q; want %d, %q", tc.err, tc.interrupted, got, stderr.String(), tc.want, tc.stderr)
		}
	}
}
