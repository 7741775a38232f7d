package identity

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps identity on the standard library only.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/sluicehq/sluice/identity" {
			t.Errorf("identity depends on %s", p)
		}
	}
}
