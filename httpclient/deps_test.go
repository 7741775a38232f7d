package httpclient

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedDeps are the modules the client packages may use beyond the
// standard library and sluice: maintained parsers of what servers send,
// rather than string splitting of our own.
var allowedDeps = []string{
	"github.com/dunglas/httpsfv", // RFC 9651 structured fields (RateLimit, RateLimit-Policy)
	"golang.org/x/net/publicsuffix",
	"github.com/temoto/robotstxt",
}

// TestDependencies: the client packages import only the standard library,
// sluice's own packages and allowedDeps (and what those need).
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
		ok := strings.HasPrefix(dep, "github.com/sluicehq/sluice/")
		for _, a := range allowedDeps {
			ok = ok || dep == a || strings.HasPrefix(dep, a+"/")
		}
		if !ok {
			t.Errorf("client packages depend on %s; want the standard library and sluice only", dep)
		}
	}
}
