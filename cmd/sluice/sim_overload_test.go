package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSimOverload: the JSON has the overload scenario's fields in order, one row
// per contender and phase; the same seed prints the same bytes (table,
// SVG and CSV); --csv writes the time series.
func TestSimOverload(t *testing.T) {
	dir := t.TempDir()
	args := []string{"overload", "--capacity", "20", "--phase", "2s", "--warmup", "1s", "--seed", "5", "--format", "json"}
	var outs, svgs, csvs []string
	for i := range 2 {
		svg := filepath.Join(dir, string(rune('a'+i))+".svg")
		series := filepath.Join(dir, string(rune('a'+i))+".csv")
		out, stderr, err := runSimArgs(t, append(args, "--svg", svg, "--csv", series)...)
		if err != nil {
			t.Fatalf("sim %v = %v\n%s", args, err, stderr)
		}
		if !strings.Contains(stderr, "8 of 8 contenders done") {
			t.Errorf("stderr %q: want progress", stderr)
		}
		b, _ := os.ReadFile(svg)
		c, _ := os.ReadFile(series)
		outs, svgs, csvs = append(outs, out), append(svgs, string(b)), append(csvs, string(c))
	}
	if outs[0] != outs[1] || svgs[0] != svgs[1] || csvs[0] != csvs[1] {
		t.Error("the same seed printed different bytes")
	}
	want := []string{"limiter", "phase", "goodput_ratio", "p99_ratio", "settle_s", "false_reject_rate", "critical_success",
		"success_test", "success_get", "success_post", "success_critical"}
	keys := jsonKeys(t, outs[0])
	if len(keys) != 40 {
		t.Errorf("%d rows, want 40 (4 limiters and 4 shedders x 5 phases)", len(keys))
	}
	// The shedders' rows have a critical_success, the limiters' none.
	if !strings.Contains(outs[0], `{"limiter": "sluice-shed-fleet", "phase": "2x"`) ||
		strings.Count(outs[0], `"critical_success": null`) != 20 {
		t.Errorf("want 20 rows with critical_success null, the shedders' 20 with a value:\n%s", outs[0])
	}
	for _, k := range keys {
		if !slices.Equal(k, want) {
			t.Fatalf("row keys %v, want %v", k, want)
		}
	}
	if !strings.HasPrefix(svgs[0], "<svg ") {
		t.Errorf("--svg wrote %.40q", svgs[0])
	}
	recs, err := csv.NewReader(strings.NewReader(csvs[0])).ReadAll()
	if err != nil || len(recs) < 2 || !slices.Equal(recs[0], []string{"limiter", "t_s", "phase", "limit", "inflight", "p99_ms", "goodput_rps"}) {
		t.Errorf("--csv: %v, header %v", err, recs[:min(1, len(recs))])
	}
	// The default text table has a dash where critical_success does not
	// apply.
	out, _, err := runSimArgs(t, "overload", "--capacity", "10", "--phase", "1s", "--warmup", "0s", "--quiet")
	if err != nil || !strings.Contains(out, "sluice-gradient") || !strings.Contains(out, " -") {
		t.Errorf("table: %v\n%s", err, out)
	}
}

func TestSimOverloadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"overload", "--capacity", "0"},
		{"overload", "--capacity", "1000000"},
		{"overload", "--phase", "0s"},
		{"overload", "--phase", "2h"},
		{"overload", "--bin", "-1s"},
		{"overload", "--bin", "20s"},
		{"overload", "--noise", "-1"},
		{"overload", "--warmup", "-1s"},
		{"overload", "--runs", "3"},
		{"overload", "--cpu-work", "0s"},
		{"overload", "--cpu-limiter", "nosuch"},
		{"overload", "--critical", "1.5"},
		{"overload", "--reserved", "0"},
		{"overload", "--reserved", "1"},
		{"overload", "--gradient-reserved", "1"},
		{"overload", "--shed-ramp", "0s"},
		{"overload", "--fleet-cap", "-1"},
		{"overload", "--only", "nosuch"},
	} {
		_, stderr, err := runSimArgs(t, args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("sim %v = %v, want a usage error", args, err)
		}
		if stderr == "" {
			t.Errorf("sim %v printed nothing on stderr", args)
		}
	}
	out, stderr, err := runSimArgs(t, "overload", "--help")
	if help := out + stderr; !errors.Is(err, flag.ErrHelp) || !strings.Contains(help, "-cpu") || !bytes.Contains([]byte(help), []byte("-csv")) {
		t.Errorf("overload --help = %v:\n%s", err, stderr)
	}
}
