package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCheckArgs(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errw bytes.Buffer
	err = run(context.Background(), append([]string{"check"}, args...), &out, &errw)
	return out.String(), err
}

func TestCheckValidRules(t *testing.T) {
	files, _ := filepath.Glob("../../examples/envoy/config/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example configs")
	}
	out, err := runCheckArgs(t, files...)
	if err != nil {
		t.Fatalf("check %v = %v\n%s", files, err, out)
	}
	if got := strings.Count(out, "ok  "); got != len(files) {
		t.Errorf("check printed %d ok lines, want %d:\n%s", got, len(files), out)
	}
	out, err = runCheckArgs(t, "-q", "../../examples/envoy/config")
	if err != nil || out != "" {
		t.Errorf("check -q DIR = %q, %v, want no output and no error", out, err)
	}
}

func TestCheckReportsEveryProblem(t *testing.T) {
	bad := "../../rules/testdata/bad/many_problems.yaml"
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(data), "\n") {
		if w, ok := strings.CutPrefix(l, "# want: "); ok {
			want = append(want, strings.Replace(w, "many_problems.yaml", bad, 1))
		}
	}
	good := "../../examples/envoy/config/edge.yaml"
	out, err := runCheckArgs(t, "-q", good, bad)
	if err == nil || errors.Is(err, errUsage) {
		t.Fatalf("check = %v, want a (non-usage) error", err)
	}
	if got := strings.TrimRight(out, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("check output:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if got, want := err.Error(), "check: 6 problems in 1 of 2 arguments"; got != want {
		t.Errorf("check error = %q, want %q", got, want)
	}
}

func TestCheckDuplicateDomainsInDir(t *testing.T) {
	dir := t.TempDir()
	src := []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	for _, n := range []string{"a.yaml", "b.yml"} {
		if err := os.WriteFile(filepath.Join(dir, n), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCheckArgs(t, dir)
	want := filepath.Join(dir, "b.yml") + `:1: domain: duplicate domain "d" (also in ` + filepath.Join(dir, "a.yaml") + ")\n"
	if err == nil || out != want {
		t.Errorf("check DIR = %q, %v, want %q and an error", out, err, want)
	}
}

func TestCheckGatewayHook(t *testing.T) {
	gw := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(gw, []byte("listen: :8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	runWith := func(c checker, args ...string) (string, error) {
		var out, errw bytes.Buffer
		err := c.run(context.Background(), args, &out, &errw)
		return out.String(), err
	}
	out, err := runWith(checker{}, gw)
	if err == nil || !strings.Contains(out, "not a rules file") {
		t.Errorf("check gateway config without hook = %q, %v, want not a rules file", out, err)
	}

	var got string
	hook := checker{gateway: func(name string, data []byte) ([]string, error) {
		got = name
		return nil, errors.New(name + ":1: listen: boom")
	}}
	out, err = runWith(hook, gw)
	if got != gw || err == nil || out != gw+":1: listen: boom\n" {
		t.Errorf("check with hook = %q, %v (hook saw %q), want the hook's problem", out, err, got)
	}

	// Rules files never go to the hook.
	got = ""
	if _, err := runWith(hook, "../../examples/envoy/config/edge.yaml"); err != nil || got != "" {
		t.Errorf("check rules file = %v (hook saw %q), want ok without the hook", err, got)
	}
}

func TestCheckUsage(t *testing.T) {
	if _, err := runCheckArgs(t); !errors.Is(err, errUsage) {
		t.Errorf("check with no files = %v, want errUsage", err)
	}
	if _, err := runCheckArgs(t, "--help"); err == nil {
		t.Errorf("check --help = nil, want flag.ErrHelp")
	}
	out, err := runCheckArgs(t, "/nonexistent/rules.yaml")
	if err == nil || !strings.Contains(out, "no such file") {
		t.Errorf("check missing file = %q, %v", out, err)
	}
}

// TestCheckGatewayHeaderNames checks that sluice check reports, at their
// lines, an unknown pseudo-header as a problem and headers that Go's
// server never shows a handler, or hop-by-hop ones, as warnings; Host and
// the pseudo-headers Envoy reads are fine.
func TestCheckGatewayHeaderNames(t *testing.T) {
	dir := t.TempDir()
	gw := filepath.Join(dir, "gw.yaml")
	cfg := `upstream: builtin:echo
routes:
  - path: /
    rate_limits:
      - actions:
          - request_headers: {header_name: ":authority", descriptor_key: authority}
          - request_headers: {header_name: host, descriptor_key: host}
          - request_headers: {header_name: Transfer-Encoding, descriptor_key: te}
      - actions:
          - header_value_match:
              descriptor_value: upgrade
              headers:
                - {name: ":method", exact_match: GET}
                - {name: connection, exact_match: upgrade}
rules:
  domain: d
  descriptors:
    - key: authority
      rate_limit: {unit: second, requests_per_unit: 1}
`
	if err := os.WriteFile(gw, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCheckArgs(t, gw)
	want := gw + ":8: routes[0].rate_limits[0].actions[2].request_headers.header_name: warning: Go's HTTP server removes Transfer-Encoding from every request (it decodes the body itself): this never sees it\n" +
		gw + ":14: routes[0].rate_limits[1].actions[0].header_value_match.headers[1].name: warning: Connection is hop-by-hop: it describes the client's connection, not the request, and an HTTP/2 request cannot carry it\n" +
		"ok  " + gw + " (gateway config, 2 warnings)\n"
	if err != nil || out != want {
		t.Errorf("check = %v, output:\n%s\nwant:\n%s", err, out, want)
	}

	// An unknown pseudo-header is a problem of the config's parse (the
	// gateway refuses it too), so the identity files are not read.
	bad := strings.Replace(cfg, `header_name: host,`, `header_name: ":status",`, 1)
	bad += "identity: {api_keys_file: missing.txt}\n"
	if err := os.WriteFile(gw, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCheckArgs(t, "-q", gw)
	if err == nil || errors.Is(err, errUsage) {
		t.Fatalf("check = %v, want a (non-usage) error", err)
	}
	for _, w := range []string{
		gw + `:7: routes[0].rate_limits[0].actions[1].request_headers.header_name: unknown pseudo-header ":status": requests have :authority, :path, :method, :scheme and :protocol`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("check output lacks %q:\n%s", w, out)
		}
	}
	if got, want := err.Error(), "check: 1 problem in 1 of 1 argument"; got != want {
		t.Errorf("check error = %q, want %q", got, want)
	}
}
