package rules

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestBadFixtures runs every file of testdata/bad: each breaks one rule
// (many_problems.yaml several) and lists the problems Parse must report,
// exactly, in "# want: " comments at its end.
func TestBadFixtures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					want = append(want, w)
				}
			}
			if len(want) == 0 {
				t.Fatalf("%s has no # want: lines", name)
			}
			cfg, err := Parse(name, data)
			if cfg != nil {
				t.Errorf("Parse(%s) returned a config with errors", name)
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse(%s) = %v, want *Errors", name, err)
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("Parse(%s) problems:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if len(*errs) != len(want) {
				t.Errorf("len(*Errors) = %d, want %d", len(*errs), len(want))
			}
		})
	}
}

// TestGoodFixtures parses every file of testdata/good and of the envoy
// examples without problems.
func TestGoodFixtures(t *testing.T) {
	t.Parallel()
	var files []string
	for _, pat := range []string{"testdata/good/*.yaml", "../examples/envoy/*.yaml", "../examples/envoy/*/*.yaml"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(f, data); err != nil {
			t.Errorf("Parse(%s) = %v, want no problems", f, err)
		}
	}
}

func TestParseYAMLFeatures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		entries   []Entry
		wantKey   string
	}{
		{"anchors and merge keys", `
domain: d
descriptors:
  - key: a
    rate_limit: &rl
      unit: second
      requests_per_unit: 5
  - key: b
    rate_limit:
      <<: *rl
      requests_per_unit: 6
`, e("b", "x"), "d.b"},
		{"numeric value is its text", `
domain: d
descriptors:
  - key: port
    value: 8080
    rate_limit: {unit: second, requests_per_unit: 1}
`, e("port", "8080"), "d.port_8080"},
		{"null descriptors", `
domain: d
descriptors:
`, e("a", "b"), ""},
		{"yes is true", `
domain: d
descriptors:
  - key: a
    shadow_mode: yes
    rate_limit: {unlimited: true}
`, e("a", "b"), "d.a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(tt.name, []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			got := ""
			if r := c.Match(tt.entries); r != nil {
				got = r.Key
			}
			if got != tt.wantKey {
				t.Errorf("Match(%v) = %q, want %q", tt.entries, got, tt.wantKey)
			}
		})
	}
}

func TestParseBillionLaughs(t *testing.T) {
	t.Parallel()
	// Each level is ten copies of the one below, keyed apart so that no
	// duplicate is reported: 10^7 descriptors once aliases are expanded.
	src := "a: &a [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		src += n + ": &" + n + " ["
		for i := 0; i < 10; i++ {
			src += "{key: k" + string(rune('0'+i)) + ", descriptors: *" + prev + "}, "
		}
		src += "]\n"
		prev = n
	}
	src = "domain: d\nx:\n" + indent(src) + "descriptors: *h\n"
	_, err := parse("laughs.yaml", []byte(src), 10000) // Parse's limit is larger, and slower to reach
	if err == nil || !strings.Contains(err.Error(), "file too large") {
		t.Errorf("Parse(billion laughs) = %v, want file too large", err)
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	return b.String()
}

func TestParseDeepNesting(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := 0; i < maxDepth+2; i++ {
		pad := strings.Repeat("  ", 2*i)
		b.WriteString(pad + "  - key: k\n" + pad + "    descriptors:\n")
	}
	_, err := Parse("deep.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("Parse(deep) = %v, want nested more than %d levels", err, maxDepth)
	}
}

func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/good", "testdata/bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte("domain: d\ndescriptors: [{key: a, value: 'b*', rate_limit: {unit: second, requests_per_unit: 1}}]"))
	f.Add([]byte("domain: d\ndescriptors: [{key: a, value: 'b*c*', share_threshold: true, metadata: {m: [1]}, rate_limit: {unit: second, requests_per_unit: 1}}, {key: 'a_b*'}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of config and error", c, err)
		}
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("Parse error %v is not a non-empty *Errors", err)
			}
			return
		}
		for _, r := range c.Rules() {
			if r.Quota == nil && !r.Unlimited {
				// What a store would refuse (a bucket over a year) is a
				// parse problem, not a rule.
				if err := (ratelimit.Request{Limit: r.Limit, Algorithm: r.Algorithm, N: 1}).Validate(); err != nil {
					t.Fatalf("rule %s has invalid limit: %v", r.Key, err)
				}
			}
			c.Match([]Entry{{"k", "v"}, {"a", "b"}})
		}
	})
}

func TestParseTooManyProblems(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := 0; i < 2*maxProblems; i++ {
		b.WriteString("  - key: \"\"\n")
	}
	_, err := Parse("many.yaml", []byte(b.String()))
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse = %v, want *Errors", err)
	}
	if got := len(*errs); got != maxProblems+1 {
		t.Errorf("len(problems) = %d, want %d", got, maxProblems+1)
	}
	// The note names the line where the walk stopped, as gc's "too many
	// errors" does, and sorts after every problem it follows.
	if last := (*errs)[len(*errs)-1].Error(); last != "many.yaml:103: too many problems: stopped after 100" {
		t.Errorf("last problem = %q", last)
	}
}

func TestParseNullRateLimit(t *testing.T) {
	t.Parallel()
	c, err := Parse("null.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n  - key: b\n    quota: ~\n"))
	if err != nil {
		t.Fatalf("Parse = %v, want an empty rate_limit to mean none, as in envoyproxy/ratelimit", err)
	}
	if r := c.Match(e("a", "x")); r != nil {
		t.Errorf("Match(a) = %v, want nil", r)
	}
}
