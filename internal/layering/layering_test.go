package layering

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// deps returns the non-test dependencies of pkg, as go list reports them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+"/"+pkg).Output()
	if err != nil {
		t.Skipf("go list %s: %v", pkg, err)
	}
	var list []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		list = append(list, sc.Text())
	}
	return list
}

func isStd(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// TestCoreIsStandardLibraryOnly: the core packages (DESIGN.md,
// Conventions) import only the standard library and each other.
func TestCoreIsStandardLibraryOnly(t *testing.T) {
	for _, pkg := range []string{"ratelimit", "internal/algorithm/gcra", "internal/algorithm/window", "internal/algorithm/slidinglog", "memstore", "backoff", "retry"} {
		if _, err := os.Stat(filepath.Join("..", "..", pkg)); err != nil {
			continue // not written yet
		}
		for _, d := range deps(t, pkg) {
			if !isStd(d) && !strings.HasPrefix(d, module+"/") {
				t.Errorf("%s depends on %s: the core must use the standard library only", pkg, d)
			}
		}
	}
}

// TestImportsPointDown: a lower layer never imports a higher one.
func TestImportsPointDown(t *testing.T) {
	// Each package, and packages it must never depend on.
	forbidden := map[string][]string{
		"ratelimit":           {"memstore", "redisstore", "internal/", "httplimit", "gateway", "rls", "rules", "identity", "httpclient"},
		"internal/algorithm/gcra":       {"memstore", "redisstore", "httplimit", "gateway", "rls"},
		"internal/algorithm/window":     {"memstore", "redisstore", "httplimit", "gateway", "rls"},
		"internal/algorithm/slidinglog": {"memstore", "redisstore", "httplimit", "gateway", "rls"},
		"memstore":            {"redisstore", "httplimit", "gateway", "rls", "rules", "identity", "httpclient"},
		"backoff":             {"retry", "httpclient", "gateway", "rls"},
		"rules":               {"httplimit", "gateway", "rls", "memstore", "redisstore"},
		"identity":            {"httplimit", "gateway", "rls"},
		"httplimit":           {"gateway", "rls"},
	}
	for pkg, bad := range forbidden {
		if _, err := os.Stat(filepath.Join("..", "..", pkg)); err != nil {
			continue
		}
		for _, d := range deps(t, pkg) {
			for _, b := range bad {
				if strings.HasPrefix(d, module+"/"+b) {
					t.Errorf("%s imports %s: imports must point down the layers of DESIGN.md", pkg, d)
				}
			}
		}
	}
}

// TestReadmeSnippetsAreExamples: every Go block in README.md is the body
// of a runnable example somewhere in the repository (modulo indentation),
// so the README cannot drift from code that compiles and runs.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go snippets")
	}
	var corpus strings.Builder
	filepath.WalkDir(filepath.Join("..", ".."), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && p != filepath.Join("..", "..") {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			corpus.WriteString(normalize(string(b)))
		}
		return nil
	})
	all := corpus.String()
	for i, b := range blocks {
		if !strings.Contains(all, normalize(string(b[1]))) {
			t.Errorf("README.md Go snippet %d is not the body of any example in a _test.go file:\n%s", i+1, b[1])
		}
	}
}

// normalize drops indentation and blank lines.
func normalize(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
