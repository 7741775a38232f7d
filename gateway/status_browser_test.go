package gateway_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns the path of Debian's chromium, skipping the test when
// it is absent (scripts/test installs it) and failing under CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (scripts/test installs it)")
		}
		t.Skip("chromium is not installed (scripts/test installs it)")
	}
	return p
}

// runChromium runs headless Chromium on url with extra flags and returns
// its stdout and its log (stderr).
func runChromium(t *testing.T, bin, url string, extra ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	return out.String(), errb.String()
}

// consoleErrors are the lines of Chromium's log that report what the page
// said on its console ("[…:INFO:CONSOLE:1] "Uncaught Error: …", source:
// …", whatever the level: the page has no script, so any line is an
// error) or a refused resource (CSP).
var consoleErrors = regexp.MustCompile(`(?m)^.*(CONSOLE[:(]|Uncaught|Refused to).*$`)

// The page in a real browser, under a flood from one address: it loads
// with no console error and shows the flooded address first. With
// SLUICE_STATUS_SCREENSHOT=<file> it also writes a screenshot there (for
// docs/operations.md: SLUICE_STATUS_SCREENSHOT=$PWD/docs/img/status.png).
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	cfg := strings.Replace(baseConfig, "    - key: user\n", "    - key: user\n      shadow_mode: true\n", 1)
	s := start(t, "", cfg)
	codes(t, clientFrom(t, "127.0.5.9"), s.url+"/", 40)
	codes(t, clientFrom(t, "127.0.5.10"), s.url+"/", 6)
	codes(t, clientFrom(t, "127.0.5.11"), s.url+"/", 4)
	codes(t, clientFrom(t, "127.0.5.12"), s.url+"/", 9, "X-API-Key", "key-bob")

	dom, log := runChromium(t, bin, s.admin+"/status?identity=ip:127.0.5.9", "--dump-dom")
	if m := consoleErrors.FindAllString(log, -1); len(m) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(m, "\n"))
	}
	i := strings.Index(dom, `id="rule-per-ip"`)
	if i < 0 {
		t.Fatalf("no per-ip section in the DOM:\n%s", dom)
	}
	first := regexp.MustCompile(`<td class="who">([^<]*)</td>`).FindStringSubmatch(dom[i:])
	if first == nil || first[1] != "remote_address=127.0.5.9" {
		t.Errorf("got first denied %q, want remote_address=127.0.5.9", first)
	}
	if !strings.Contains(dom, `id="lookup"`) || !strings.Contains(dom, "<svg") {
		t.Error("the DOM lacks the lookup answer or the chart")
	}
	if out := os.Getenv("SLUICE_STATUS_SCREENSHOT"); out != "" {
		abs, err := filepath.Abs(out)
		must(t, err)
		_, log := runChromium(t, bin, s.admin+"/status?identity=ip:127.0.5.9", "--screenshot="+abs, "--window-size=1280,1500", "--hide-scrollbars")
		if _, err := os.Stat(abs); err != nil {
			t.Errorf("no screenshot: %v\n%s", err, log)
		}
	}
}
