package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func runSimArgs(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errw bytes.Buffer
	err = run(context.Background(), append([]string{"sim"}, args...), &out, &errw)
	return out.String(), errw.String(), err
}

// jsonKeys returns the keys of each object of a JSON array, in order.
func jsonKeys(t *testing.T, data string) [][]string {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, data)
	}
	var out [][]string
	for _, r := range raw {
		d := json.NewDecoder(bytes.NewReader(r))
		d.Token() // {
		var keys []string
		for d.More() {
			k, _ := d.Token()
			keys = append(keys, k.(string))
			var v any
			if err := d.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, keys)
	}
	return out
}

func TestSimMachineOutput(t *testing.T) {
	tests := []struct {
		args []string
		rows int
		keys []string
	}{
		{[]string{"brooker", "--format", "json", "--clients", "50,100", "--runs", "2"}, 10,
			[]string{"strategy", "clients", "runs", "mean_time_ms", "mean_calls"}},
		{[]string{"objectstore", "--format", "json"}, 2,
			[]string{"strategy", "requests", "succeeded", "dropped", "elapsed_ms", "calls", "throttled"}},
	}
	for _, tt := range tests {
		out, _, err := runSimArgs(t, tt.args...)
		if err != nil {
			t.Fatalf("sim %v = %v", tt.args, err)
		}
		keys := jsonKeys(t, out)
		if len(keys) != tt.rows {
			t.Errorf("sim %v printed %d rows, want %d", tt.args, len(keys), tt.rows)
		}
		for _, k := range keys {
			if !slices.Equal(k, tt.keys) {
				t.Errorf("sim %v: row keys %v, want %v", tt.args, k, tt.keys)
			}
		}
	}
	var rows []struct {
		Strategy  string
		Succeeded int
		Dropped   int
	}
	out, _, err := runSimArgs(t, "objectstore", "--format", "json")
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil {
		t.Fatalf("objectstore: %v\n%s", err, out)
	}
	if rows[0].Strategy != "backoff" || rows[0].Succeeded != 9 || rows[0].Dropped != 0 {
		t.Errorf("objectstore backoff row = %+v, want 9 landed, 0 dropped", rows[0])
	}
}

func TestSimSameSeedSameBytes(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"brooker", "--clients", "20", "--runs", "3", "--format", "csv"},
		{"objectstore"},
		{"aimd", "--phases", "0s:30,20s:50", "--duration", "40s", "--format", "json"},
		{"buckets", "--format", "csv"},
		{"windows", "--sources", "10", "--duration", "5m"},
	} {
		var outs, svgs []string
		for i := range 2 {
			svg := filepath.Join(dir, args[0]+string(rune('a'+i))+".svg")
			out, _, err := runSimArgs(t, append(args, "--seed", "9", "--svg", svg)...)
			if err != nil {
				t.Fatalf("sim %v = %v", args, err)
			}
			b, err := os.ReadFile(svg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("<svg ")) || !bytes.HasSuffix(b, []byte("</svg>\n")) {
				t.Errorf("sim %v --svg wrote %.40q…, want an SVG document", args, b)
			}
			outs, svgs = append(outs, out), append(svgs, string(b))
		}
		if outs[0] != outs[1] || svgs[0] != svgs[1] {
			t.Errorf("sim %v --seed 9 printed different bytes on two runs", args)
		}
		if strings.TrimSpace(outs[0]) == "" {
			t.Errorf("sim %v printed nothing", args)
		}
	}
}

func TestSimUsage(t *testing.T) {
	tests := []struct {
		args []string
		want error
	}{
		{nil, errUsage},
		{[]string{"nosuch"}, errUsage},
		{[]string{"brooker", "--format", "yaml"}, errUsage},
		{[]string{"brooker", "--strategies", "linear"}, errUsage},
		{[]string{"brooker", "--clients", "0"}, errUsage},
		{[]string{"aimd", "--phases", "40"}, errUsage},
		{[]string{"aimd", "--phases", "0s:40,60s:100", "--duration", "30s"}, errUsage},
		{[]string{"buckets", "--runs", "3"}, errUsage},
		{[]string{"objectstore", "extra"}, errUsage},
		{[]string{"brooker", "--help"}, flag.ErrHelp},
	}
	// Invalid values are refused, never silently replaced by defaults.
	for _, args := range [][]string{
		{"brooker", "--base", "0s"},
		{"brooker", "--cap", "-1s"},
		{"brooker", "--base", "2s", "--cap", "1s"},
		{"objectstore", "--requests", "-3"},
		{"objectstore", "--budget", "0"},
		{"objectstore", "--max-attempts", "0"},
		{"objectstore", "--tick", "0s"},
		{"objectstore", "--base", "-1ms"},
		{"aimd", "--duration", "-1s"},
		{"aimd", "--phases", "0s:0"},
		{"aimd", "--phases", "-1s:40"},
		{"aimd", "--phases", "60s:40,10s:100"},
		{"buckets", "--rate", "0"},
		{"buckets", "--burst", "-1"},
		{"buckets", "--background", "-2"},
		{"windows", "--sources", "0"},
		{"windows", "--rate", "-1"},
		{"windows", "--period", "0s"},
		{"windows", "--duration", "0s"},
		{"windows", "--runs", "-1"},
	} {
		tests = append(tests, struct {
			args []string
			want error
		}{args, errUsage})
	}
	for _, tt := range tests {
		_, stderr, err := runSimArgs(t, tt.args...)
		if !errors.Is(err, tt.want) {
			t.Errorf("sim %v = %v, want %v", tt.args, err, tt.want)
		}
		if stderr == "" && len(tt.args) > 0 {
			t.Errorf("sim %v printed nothing on stderr", tt.args)
		}
	}
	out, _, err := runSimArgs(t, "--help")
	if err != nil || !strings.Contains(out, "brooker") || !strings.Contains(out, "windows") {
		t.Errorf("sim --help = %v, printed:\n%s\nwant the scenarios", err, out)
	}
}

// TestSimDocsFigures checks that the committed figures of
// docs/simulations.md are what its commands draw today, for the scenarios
// quick enough to redraw in a test. Regenerate a stale one with the command
// in the message.
func TestSimDocsFigures(t *testing.T) {
	for _, tt := range []struct {
		file string
		args []string
	}{
		{"objectstore.svg", []string{"objectstore"}},
		{"objectstore-200ms.svg", []string{"objectstore", "--tick", "200ms"}},
		{"buckets.svg", []string{"buckets"}},
	} {
		want, err := os.ReadFile(filepath.Join("..", "..", "docs", "sim", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		svg := filepath.Join(t.TempDir(), tt.file)
		if _, _, err := runSimArgs(t, append(tt.args, "--svg", svg)...); err != nil {
			t.Fatalf("sim %v = %v", tt.args, err)
		}
		got, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/sim/%s is stale: run go run ./cmd/sluice sim %s --svg docs/sim/%s",
				tt.file, strings.Join(tt.args, " "), tt.file)
		}
	}
}
