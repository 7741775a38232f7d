package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimRegions: the same seed prints the same bytes, the table has the
// four designs of every scenario, and the SVG is written.
func TestSimRegions(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "regions.svg")
	args := []string{"regions", "--keys", "2", "--duration", "30s", "--format", "csv", "--svg", svg}
	out1, _, err := runSimArgs(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	out2, _, err := runSimArgs(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if out1 != out2 {
		t.Errorf("two runs differ:\n%s\n%s", out1, out2)
	}
	lines := strings.Split(strings.TrimSpace(out1), "\n")
	if got, want := lines[0], "scenario,design,offered,admitted,vs_exact,max_vs_exact,over_admission_pct,peak_window,p50_ms,p99_ms"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	if got, want := len(lines)-1, 8*4; got != want {
		t.Errorf("%d rows, want %d (8 scenarios × 4 designs)", got, want)
	}
	if !strings.HasPrefix(lines[2], "50/50 1x,per-region,") {
		t.Errorf("second row %q", lines[2])
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "per-region") {
		t.Errorf("svg: %v, %.80q", err, b)
	}
}

func TestSimRegionsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"regions", "--keys", "0"},
		{"regions", "--cross-rtt", "0s"},
		{"regions", "--rate", "-1"},
		{"regions", "--runs", "3"},
	} {
		_, stderr, err := runSimArgs(t, args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: err %v, want a usage error (stderr %q)", args, err, stderr)
		}
	}
}
