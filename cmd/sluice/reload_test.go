package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/identity"
)

// reloadConfig limits per user, with keys from keys.txt.
const reloadConfig = `upstream: builtin:echo
identity:
  api_keys_file: keys.txt
routes:
  - path: /
    rate_limits: [{actions: [{identity: {}}]}]
rules:
  domain: d
  descriptors:
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: hour, requests_per_unit: 1000}
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 1000}
`

// replaceFile writes name in one step (a new file renamed over it), so
// that the server never reads it half written.
func replaceFile(t *testing.T, name, content string) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// TestServeRevokesKeyWithoutSIGHUP checks that sluice serve watches the
// API keys file as it watches its config: a key removed from it gets 401
// within the watch interval, with no signal and no change to the config.
func TestServeRevokesKeyWithoutSIGHUP(t *testing.T) {
	dir := t.TempDir()
	file, keys := filepath.Join(dir, "gw.yaml"), filepath.Join(dir, "keys.txt")
	replaceFile(t, file, reloadConfig)
	replaceFile(t, keys, identity.HashKey("key-alice")+" alice\n"+identity.HashKey("key-bob")+" bob\n")
	pub, _, _ := serveProcess(t, "--config", file, "--watch-interval", "20ms")
	if code, _ := status(t, pub+"/", "X-API-Key", "key-alice"); code != 200 {
		t.Fatalf("alice before revocation: %d, want 200", code)
	}
	replaceFile(t, keys, identity.HashKey("key-bob")+" bob\n")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if code, _ := status(t, pub+"/", "X-API-Key", "key-alice"); code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's revoked key still works a minute later")
		}
	}
	if code, _ := status(t, pub+"/", "X-API-Key", "key-bob"); code != 200 {
		t.Errorf("bob after alice's revocation: %d, want 200", code)
	}
}

// TestServeCountsEveryRefusedConfig checks that sluice serve counts each
// refused config once in sluice_gateway_config_reloads_total: it reloaded
// through Gateway.Reload and logged parse errors without counting them,
// so six refused configs showed as one.
func TestServeCountsEveryRefusedConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	replaceFile(t, file, reloadConfig)
	replaceFile(t, filepath.Join(dir, "keys.txt"), identity.HashKey("key-alice")+" alice\n")
	pub, admin, logs := serveProcess(t, "--config", file, "--watch-interval", "20ms")
	waitRefused := func(what string) {
		t.Helper()
		timeout := time.After(time.Minute) // a bound, not a timing assertion
		for {
			select {
			case l := <-logs:
				if strings.Contains(l, "config reloaded") {
					t.Fatalf("%s: %s", what, l)
				}
				if strings.Contains(l, "config refused") {
					return
				}
			case <-timeout:
				t.Fatalf("%s: no config refused log line", what)
			}
		}
	}
	for _, r := range []struct {
		name string
		make func()
	}{
		{"YAML syntax error", func() { replaceFile(t, file, "routes: [\n") }},
		{"unknown field", func() { replaceFile(t, file, reloadConfig+"colour: blue\n") }},
		{"bad rule unit", func() { replaceFile(t, file, strings.Replace(reloadConfig, "unit: hour", "unit: fortnight", 1)) }},
		{"missing keys file", func() { replaceFile(t, file, strings.Replace(reloadConfig, "keys.txt", "keys2.txt", 1)) }},
		{"bad keys file", func() { replaceFile(t, filepath.Join(dir, "keys2.txt"), "not a key line\n") }},
		{"unreadable config file", func() {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(os.Getpid(), syscall.SIGHUP)
		}},
	} {
		r.make()
		waitRefused(r.name)
	}
	if code, _ := status(t, pub+"/", "X-API-Key", "key-alice"); code != 200 {
		t.Errorf("alice after six refused configs: %d, want 200 (the first config serving)", code)
	}
	body := fetch(t, admin+"/metrics")
	for _, want := range []string{`sluice_gateway_config_reloads_total{result="invalid"} 6`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `sluice_gateway_config_reloads_total{result="ok"}`) {
		t.Errorf("/metrics counts a successful reload:\n%s", grepLines(body, "config_reloads"))
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(out)
}
