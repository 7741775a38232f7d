package rules

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps rules on the standard library, yaml.v3, sluice's own
// vocabulary and its standard-library-only internal helpers.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "go.yaml.in/yaml/v3", strings.HasPrefix(p, "github.com/sluicehq/sluice/rules"), p == "github.com/sluicehq/sluice/ratelimit", p == "github.com/sluicehq/sluice/internal/config/didyoumean", p == "github.com/sluicehq/sluice/internal/config/yamlnode":
		default:
			t.Errorf("rules depends on %s", p)
		}
	}
}
