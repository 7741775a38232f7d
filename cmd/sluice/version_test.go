package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if !strings.HasPrefix(line, "sluice ") || !strings.Contains(line, runtime.GOOS+"/"+runtime.GOARCH) || strings.Count(line, "\n") != 1 {
		t.Errorf("sluice version = %q", line)
	}
	var flagOut bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &flagOut, io.Discard); err != nil || flagOut.String() != line {
		t.Errorf("sluice --version = %q, %v; want %q", flagOut.String(), err, line)
	}
	var js bytes.Buffer
	if err := run(context.Background(), []string{"version", "--json"}, &js, io.Discard); err != nil {
		t.Fatal(err)
	}
	var b buildInfo
	if err := json.Unmarshal(js.Bytes(), &b); err != nil || b.Module != "github.com/sluicehq/sluice" || b.GoVersion == "" {
		t.Errorf("sluice version --json = %s (%v)", js.String(), err)
	}
}

func TestBuildInfoString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    buildInfo
		want string
	}{
		{buildInfo{Version: "v1.2.3", GoVersion: "go1.26.0", Platform: "linux/amd64"}, "sluice v1.2.3; go1.26.0 linux/amd64"},
		{buildInfo{Version: "(devel)", Revision: "abc", Time: "2026-11-25T18:00:00Z", Modified: true, GoVersion: "go1.26.0", Platform: "linux/arm64"},
			"sluice (devel) revision abc, 2026-11-25T18:00:00Z, modified; go1.26.0 linux/arm64"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.b, got, tc.want)
		}
	}
}

// TestAsRatelimit: named ratelimit (envoyproxy/ratelimit's /bin/ratelimit),
// sluice is sluice rls unless its arguments name a command.
func TestAsRatelimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv0 string
		args  []string
		want  string
	}{
		{"/bin/ratelimit", nil, "rls"},
		{"/bin/ratelimit", []string{"--log-level", "debug"}, "rls --log-level debug"},
		{"ratelimit", []string{"version"}, "version"},
		{"/bin/ratelimit", []string{"--version"}, "--version"},
		{"/usr/local/bin/sluice", []string{"serve"}, "serve"},
		{"/usr/local/bin/sluice", nil, ""},
	} {
		if got := strings.Join(asRatelimit(tc.argv0, tc.args), " "); got != tc.want {
			t.Errorf("asRatelimit(%q, %q) = %q, want %q", tc.argv0, tc.args, got, tc.want)
		}
	}
}
