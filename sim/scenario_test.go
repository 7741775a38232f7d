package sim

import (
	"flag"
	"testing"
)

// TestScenarios: every scenario has a name of its own and a summary, and
// Lookup finds it by name (and nothing by another).
func TestScenarios(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Scenarios() {
		if s.Name == "" || s.Summary == "" || seen[s.Name] {
			t.Errorf("scenario %q (summary %q): want a unique name and a summary", s.Name, s.Summary)
		}
		seen[s.Name] = true
		if got, ok := Lookup(s.Name); !ok || got.Name != s.Name {
			t.Errorf("Lookup(%q) = %q, %v", s.Name, got.Name, ok)
		}
		fs := flag.NewFlagSet(s.Name, flag.ContinueOnError)
		if s.Flags(fs) == nil {
			t.Errorf("%s: Flags returned no run function", s.Name)
		}
	}
	if _, ok := Lookup("nosuch"); ok {
		t.Error(`Lookup("nosuch") found a scenario`)
	}
}
