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
	if err := os.WriteFile(gw, []byte("upstream: builtin:echo\nlisten: :8080\n"), 0o644); err != nil {
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
	// gateway refuses it too); the missing keys file is reported beside it,
	// at its line.
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
		gw + `:20: identity.api_keys_file: open ` + filepath.Join(dir, "missing.txt") + `: no such file or directory`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("check output lacks %q:\n%s", w, out)
		}
	}
	if got, want := err.Error(), "check: 2 problems in 1 of 1 argument"; got != want {
		t.Errorf("check error = %q, want %q", got, want)
	}
}

// writeFiles writes name, content pairs into dir.
func writeFiles(t *testing.T, dir string, files ...string) {
	t.Helper()
	for i := 0; i+1 < len(files); i += 2 {
		if err := os.WriteFile(filepath.Join(dir, files[i]), []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const checkGW = "upstream: builtin:echo\nroutes:\n  - path: /\n"

// TestCheckRefusesWhatServeRefuses: each config here is refused by sluice
// serve at start, and sluice check reports why at the config's line.
func TestCheckRefusesWhatServeRefuses(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, "keys.txt", "nothex alice\n")
	for _, tc := range []struct {
		name, config string
		want         []string // lines of check's output, after "FILE:"
	}{
		{"listen.yaml", "listen: not-an-address\nadmin_listen: 127.0.0.1:0\n" + checkGW,
			[]string{`1: listen: "not-an-address": missing port in address: want HOST:PORT, such as 127.0.0.1:8080 or :8080`}},
		{"admin.yaml", "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:99999\n" + checkGW,
			[]string{`2: admin_listen: "127.0.0.1:99999": port 99999 is out of range (0 to 65535)`}},
		{"missingkeys.yaml", "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" + checkGW + "identity:\n  api_keys_file: nosuch.txt\n",
			[]string{`7: identity.api_keys_file: open ` + filepath.Join(dir, "nosuch.txt") + `: no such file or directory`}},
		{"badkeys.yaml", "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" + checkGW + "identity:\n  api_keys_file: keys.txt\n",
			[]string{`7: identity.api_keys_file: ` + filepath.Join(dir, "keys.txt") + `:1: key hash is 6 characters, want the 64 hex digits of a SHA-256`}},
		{"jwt.yaml", "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" + checkGW + "identity:\n  jwt:\n    alg: HS256\n    key_file: nosuch.key\n",
			[]string{`9: identity.jwt.key_file: open ` + filepath.Join(dir, "nosuch.key") + `: no such file or directory`}},
		// Several problems at once: the parse's and the file's, in line order.
		{"many.yaml", "listen: 127.0.0.1:99999\nstore: nope\n" + checkGW + "identity:\n  api_keys_file: nosuch.txt\n",
			[]string{
				`1: listen: "127.0.0.1:99999": port 99999 is out of range (0 to 65535)`,
				`2: store: want memory or a redis://, rediss://, redis-cluster://, rediss-cluster://, redis-sentinel:// or unix:// URL, got "nope"`,
				`7: identity.api_keys_file: open ` + filepath.Join(dir, "nosuch.txt") + `: no such file or directory`,
			}},
	} {
		name := filepath.Join(dir, tc.name)
		writeFiles(t, dir, tc.name, tc.config)
		out, err := runCheckArgs(t, name)
		var want []string
		for _, w := range tc.want {
			want = append(want, name+":"+w)
		}
		if err == nil || strings.TrimRight(out, "\n") != strings.Join(want, "\n") {
			t.Errorf("check %s = %v, output:\n%s\nwant:\n%s", tc.name, err, out, strings.Join(want, "\n"))
		}
		// serve refuses it too (and so never starts listening).
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"serve", "--config", name}, &stdout, &stderr); err == nil {
			t.Errorf("serve --config %s = nil, want it refused", tc.name)
		}
	}
	// What serve takes, check takes: any port, a service name.
	writeFiles(t, dir, "good.yaml", "listen: :0\nadmin_listen: 127.0.0.1:http\n"+checkGW)
	if out, err := runCheckArgs(t, filepath.Join(dir, "good.yaml")); err != nil {
		t.Errorf("check good.yaml = %v\n%s", err, out)
	}
	// A snapshot directory that does not exist: serve starts, but loses the
	// counters when it stops.
	writeFiles(t, dir, "snap.yaml", checkGW+"snapshot:\n  file: nosuch/snap.bin\n")
	out, err := runCheckArgs(t, filepath.Join(dir, "snap.yaml"))
	want := filepath.Join(dir, "snap.yaml") + ":5: snapshot.file: warning: directory " + filepath.Join(dir, "nosuch") + " does not exist: the counters cannot be saved there when serve stops\n"
	if err != nil || !strings.HasPrefix(out, want) {
		t.Errorf("check snap.yaml = %v, output:\n%s\nwant:\n%s", err, out, want)
	}
}

// TestCheckKindByContent: a rules file with a misspelt domain is checked
// as a rules file, a gateway config as one, and the ok line says which.
func TestCheckKindByContent(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir,
		"misspelt.yaml", "domian: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"rules.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"gw.yaml", checkGW,
		"neither.yaml", "listen: :0\n")
	out, err := runCheckArgs(t, filepath.Join(dir, "misspelt.yaml"))
	if err == nil || !strings.Contains(out, `misspelt.yaml:1: unknown field "domian" (did you mean "domain"?)`) || strings.Contains(out, "upstream") {
		t.Errorf("check misspelt.yaml = %v, output:\n%s\nwant the rules parser's problems", err, out)
	}
	out, err = runCheckArgs(t, filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "gw.yaml"))
	want := "ok  " + filepath.Join(dir, "rules.yaml") + " (rules: domain d, 1 rule)\n" +
		"ok  " + filepath.Join(dir, "gw.yaml") + " (gateway config)\n"
	if err != nil || out != want {
		t.Errorf("check = %v, output:\n%s\nwant:\n%s", err, out, want)
	}
	out, err = runCheckArgs(t, filepath.Join(dir, "neither.yaml"))
	if err == nil || !strings.Contains(out, "note: checked as a gateway config (no top-level upstream or routes") {
		t.Errorf("check neither.yaml = %v, output:\n%s\nwant a note of what was assumed", err, out)
	}
}

// TestCheckDirOfGatewayConfigs: a directory holding gateway configs has
// each checked as one, and its rules files together.
func TestCheckDirOfGatewayConfigs(t *testing.T) {
	out, err := runCheckArgs(t, "../../examples")
	if err != nil || out != "ok  ../../examples (2 gateway configs)\n" {
		t.Errorf("check examples = %v, output:\n%s", err, out)
	}
	dir := t.TempDir()
	writeFiles(t, dir,
		"a.yaml", checkGW,
		"b.yaml", "admin_listen: 127.0.0.1:99999\n"+checkGW,
		"r.yml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"notes.txt", "not yaml: [")
	out, err = runCheckArgs(t, dir)
	want := filepath.Join(dir, "b.yaml") + `:1: admin_listen: "127.0.0.1:99999": port 99999 is out of range (0 to 65535)` + "\n"
	if err == nil || out != want {
		t.Errorf("check DIR = %v, output:\n%s\nwant:\n%s", err, out, want)
	}
	writeFiles(t, dir, "b.yaml", checkGW)
	out, err = runCheckArgs(t, dir)
	want = "ok  " + dir + " (2 gateway configs; rules directory: 1 domain, 1 rule)\n"
	if err != nil || out != want {
		t.Errorf("check DIR = %v, output:\n%s\nwant:\n%s", err, out, want)
	}
}
