package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPrefetchSpellings: sluice check accepts lease: true and a store
// URL's lease=on (prefetch's old spellings) with a warning each at its
// file:line, in a rules file, a rules directory and a gateway config, and
// refuses prefetch: true on an algorithm prefetch mode does not decide,
// at the field's file:line.
func TestCheckPrefetchSpellings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const rule = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: %s, unit: second, requests_per_unit: 10, %s: true}\n"
	old := write("rules/old.yaml", strings.NewReplacer("%s: true", "lease: true", "%s", "gcra").Replace(rule))
	warn := old + ":4: descriptors[0].rate_limit.lease: warning: lease is deprecated (it now means the in-flight slot only): write prefetch: true, which means the same"
	for _, arg := range []string{old, filepath.Dir(old)} {
		out, err := runCheckArgs(t, arg)
		if err != nil || !strings.Contains(out, warn+"\n") || !strings.Contains(out, "ok  ") {
			t.Errorf("check %s = %v\n%s\nwant ok with the warning %q", arg, err, out, warn)
		}
	}
	gw := write("gateway.yaml", "listen: 127.0.0.1:0\nupstream: builtin:echo\nstore: redis://127.0.0.1:1?lease=on\nroutes:\n  - path: /\n    rate_limits:\n      - actions:\n          - generic_key: {descriptor_value: x}\nrules:\n  domain: g\n  descriptors:\n    - key: generic_key\n      rate_limit: {unit: second, requests_per_unit: 10}\n")
	out, err := runCheckArgs(t, gw)
	if want := gw + ":3: store: warning: URL parameter lease is deprecated (a lease is now only the in-flight slot): write prefetch=on, which means the same"; err != nil || !strings.Contains(out, want+"\n") {
		t.Errorf("check %s = %v\n%s\nwant the warning %q", gw, err, out, want)
	}
	bad := write("bad.yaml", strings.NewReplacer("%s: true", "prefetch: true", "%s", "leaky_bucket").Replace(rule))
	out, err = runCheckArgs(t, bad)
	if want := bad + ":4: descriptors[0].rate_limit.prefetch: prefetch mode does not decide leaky_bucket"; err == nil || !strings.Contains(out, want) {
		t.Errorf("check %s = %v\n%s\nwant the problem %q", bad, err, out, want)
	}
}
