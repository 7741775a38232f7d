package docsrun

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMain doubles as a tiny HTTP server for TestRun's background command:
// with DOCSRUN_SERVE=ADDR the test binary serves 200s on ADDR and never
// returns (Run kills it), so the test needs nothing but bash and curl.
func TestMain(m *testing.M) {
	if addr := os.Getenv("DOCSRUN_SERVE"); addr != "" {
		fmt.Println("serving on", addr)
		err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func goCommand(dir string, args ...string) *exec.Cmd {
	c := exec.Command("go", args...)
	c.Dir = dir
	return c
}

// goEnv is go env name, run in dir.
func goEnv(t *testing.T, dir, name string) string {
	t.Helper()
	out, err := goCommand(dir, "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func itoa(n int) string { return strconv.Itoa(n) }
