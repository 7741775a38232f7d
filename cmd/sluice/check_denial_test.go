package main

import (
	"os"
	"path/filepath"
	"testing"
)

// sluice check reports a bad denial section at its file:line, and passes
// a good one.
func TestCheckGatewayDenial(t *testing.T) {
	gw := filepath.Join(t.TempDir(), "gw.yaml")
	good := `upstream: builtin:echo
denial: {status: 503, body: '{"error": "busy", "retry_after": {retry_after}}', content_type: application/json}
routes:
  - path: /
rules: {domain: d, descriptors: []}
`
	if err := os.WriteFile(gw, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCheckArgs(t, gw); err != nil || out != "ok  "+gw+" (gateway config)\n" {
		t.Errorf("check good denial = %q, %v", out, err)
	}
	bad := `upstream: builtin:echo
routes:
  - path: /
    denial: {status: 302, body: moved}
rules: {domain: d, descriptors: []}
`
	if err := os.WriteFile(gw, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	want := gw + `:4: routes[0].denial.status: want a whole number from 400 to 599, got "302"` + "\n"
	if out, err := runCheckArgs(t, "-q", gw); err == nil || out != want {
		t.Errorf("check bad denial = %q, %v, want %q", out, err, want)
	}
}
