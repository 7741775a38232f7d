package httpclient

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: the client packages import only the standard library
// and sluice's own packages.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	pkgs := []string{"backoff", "retry", "breaker", "adaptive", "hostlimit", "httpclient"}
	args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}
	for _, p := range pkgs {
		args = append(args, "github.com/sluicehq/sluice/"+p)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, "github.com/sluicehq/sluice/") {
			t.Errorf("client packages depend on %s; want the standard library and sluice only", dep)
		}
	}
}
