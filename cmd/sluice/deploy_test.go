package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/rls/runner"
)

// stopMargin is the least time an artefact leaves a server between the
// end of its drain and the kill: the gateway's last snapshot, the
// listeners' close, a slow disk.
const stopMargin = 5 * time.Second

// drainOf is how long a command drains after SIGTERM, from the code.
func drainOf(t *testing.T, command string) time.Duration {
	t.Helper()
	switch command {
	case "serve":
		return gateway.DefaultShutdownTimeout
	case "rls", "":
		return runner.DrainTimeout
	}
	t.Fatalf("no drain timeout known for command %q", command)
	return 0
}

// TestDeployStopTimeouts reads every artefact under deploy/ and checks
// that what stops the server there (systemd's TimeoutStopSec, Kubernetes'
// terminationGracePeriodSeconds less a preStop sleep, docker's
// --stop-timeout in docs/deploy.md) waits for the drain plus stopMargin.
// The gateway's unit stopped after 15 s while its drain takes up to 30 s,
// so a slow drain was killed and its last snapshot lost.
func TestDeployStopTimeouts(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy")
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(p, ".service"):
			checkUnit(t, p, b)
			checked++
		case strings.HasSuffix(p, ".yaml"):
			checked += checkManifest(t, p, b)
		case strings.HasPrefix(filepath.Base(p), "Dockerfile"):
			// An image sets no stop timeout; docker run's is in the docs.
		default:
			t.Errorf("%s: an artefact this test does not know: teach it its stop timeout", p)
		}
	}
	checked += checkDockerRun(t, filepath.Join("..", "..", "docs", "deploy.md"))
	if checked < 4 {
		t.Errorf("checked %d stop timeouts, want the 2 units, the Deployment and docker run", checked)
	}
}

var execStart = regexp.MustCompile(`/sluice\s+(\w+)`)

func checkUnit(t *testing.T, path string, b []byte) {
	t.Helper()
	var cmd string
	stop := time.Duration(-1)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "ExecStart":
			if m := execStart.FindStringSubmatch(v); m != nil {
				cmd = m[1]
			}
		case "TimeoutStopSec", "TimeoutSec":
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s:%d: %s=%s: %v", path, line, k, v, err)
			}
			stop = d
		}
	}
	if cmd == "" {
		t.Fatalf("%s: no ExecStart running sluice", path)
	}
	if stop < 0 {
		t.Errorf("%s: no TimeoutStopSec: say how long the drain may take", path)
		return
	}
	if want := drainOf(t, cmd) + stopMargin; stop < want {
		t.Errorf("%s: TimeoutStopSec=%v, want at least %v (sluice %s drains for %v, plus %v)", path, stop, want, cmd, drainOf(t, cmd), stopMargin)
	}
}

// checkManifest checks each pod template of path that runs sluice's
// image, and returns how many it checked.
func checkManifest(t *testing.T, path string, b []byte) int {
	t.Helper()
	n := 0
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return n
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		walkPodSpecs(doc, func(spec map[string]any) {
			for _, c := range asList(spec["containers"]) {
				c, _ := c.(map[string]any)
				if img, _ := c["image"].(string); !strings.Contains(img, "sluice") {
					continue
				}
				grace := 30 * time.Second // Kubernetes' default
				if g, ok := spec["terminationGracePeriodSeconds"].(int); ok {
					grace = time.Duration(g) * time.Second
				}
				grace -= preStopSleep(c)
				if want := drainOf(t, sluiceCommand(c)) + stopMargin; grace < want {
					t.Errorf("%s: container %v: terminationGracePeriodSeconds less preStop is %v, want at least %v", path, c["name"], grace, want)
				}
				n++
			}
		})
	}
}

// walkPodSpecs calls f on every map with a containers list.
func walkPodSpecs(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["containers"]; ok {
			f(v)
		}
		for _, e := range v {
			walkPodSpecs(e, f)
		}
	case []any:
		for _, e := range v {
			walkPodSpecs(e, f)
		}
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

// sluiceCommand is the sluice command a container runs: its args' first
// word, or the image's default (rls; /bin/ratelimit is sluice rls).
func sluiceCommand(c map[string]any) string {
	for _, a := range append(asList(c["command"]), asList(c["args"])...) {
		switch s, _ := a.(string); s {
		case "serve", "rls":
			return s
		}
	}
	return "rls"
}

// preStopSleep is a container's preStop sleep, which Kubernetes counts in
// the grace period.
func preStopSleep(c map[string]any) time.Duration {
	lc, _ := c["lifecycle"].(map[string]any)
	ps, _ := lc["preStop"].(map[string]any)
	if s, ok := ps["sleep"].(map[string]any); ok {
		if n, ok := s["seconds"].(int); ok {
			return time.Duration(n) * time.Second
		}
	}
	if e, ok := ps["exec"].(map[string]any); ok {
		for _, a := range asList(e["command"]) {
			s, _ := a.(string)
			if m := regexp.MustCompile(`sleep\s+(\d+)`).FindStringSubmatch(s); m != nil {
				n, _ := strconv.Atoi(m[1])
				return time.Duration(n) * time.Second
			}
		}
	}
	return 0
}

var stopTimeout = regexp.MustCompile(`--stop-timeout[ =](\d+)`)

// checkDockerRun checks the docker run lines of docs/deploy.md: docker
// stops a container after 10 s unless --stop-timeout says otherwise.
func checkDockerRun(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "docker run") || strings.Contains(line, " version") {
			continue
		}
		stop := 10 * time.Second
		if m := stopTimeout.FindStringSubmatch(line); m != nil {
			s, _ := strconv.Atoi(m[1])
			stop = time.Duration(s) * time.Second
		}
		if want := drainOf(t, "rls") + stopMargin; stop < want {
			t.Errorf("%s:%d: docker run stops after %v, want --stop-timeout of at least %v", path, i+1, stop, want)
		}
		n++
	}
	return n
}

// TestDeployUnitVariables: every SLUICE_* variable a unit sets is one its
// command reads (the command would refuse to start otherwise).
func TestDeployUnitVariables(t *testing.T) {
	units, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units: %v", err)
	}
	envRE := regexp.MustCompile(`(?m)^#?\s*Environment=(SLUICE_[A-Z0-9_]+)=`)
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		m := execStart.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no ExecStart running sluice", u)
		}
		cmd := string(m[1])
		var help strings.Builder
		run(context.Background(), []string{cmd, "--help"}, io.Discard, &help)
		for _, v := range envRE.FindAllSubmatch(b, -1) {
			name := string(v[1])
			if !strings.Contains(help.String(), "(env "+name) && !slices.Contains(otherEnv["sluice "+cmd], name) {
				t.Errorf("%s: sets %s, which sluice %s does not read", u, name, cmd)
			}
		}
	}
}
