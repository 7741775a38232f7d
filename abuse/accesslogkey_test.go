package abuse

import (
	"fmt"
	"path/filepath"
	"testing"
)

// perIPGateway is a gateway config proxying to upstream, with top's
// settings, limiting each client address (rule per-ip) to perHour
// requests an hour with algorithm.
func perIPGateway(upstream, top, algorithm string, perHour int) string {
	return fmt.Sprintf(`
upstream: %s
%s
routes:
  - path: /
    rate_limits:
      - actions: [{remote_address: {}}]
rules:
  domain: abuse
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: %s, unit: hour, requests_per_unit: %d}
`, upstream, top, algorithm, perHour)
}

// Bound: a gateway access log line names the request it decided (method
// and path, which the operator greps for beside the caller), and with
// access_log.key_file (sluice rls: --access-log-key-file) the caller's
// hash is the same across restarts, so one caller's lines are found
// across deploys and instances; without it the hash is drawn per process,
// and no line holds the caller in clear either way.
func TestAccessLogKeyAndRequest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "access.key", "0123456789abcdef0123456789abcdef\n")
	logFile := filepath.Join(dir, "access.log")
	cfg := writeFile(t, dir, "gateway.yaml", perIPGateway("builtin:echo", "access_log: {file: "+logFile+", key_file: access.key}", "token_bucket", 5))
	c := client(t)
	for range 2 { // two processes: a restart
		g := startServe(t, cfg)
		do(t, c, "GET", g.url+"/items/42?q=1")
		g.stop()
	}
	lines, _, _ := accessLines(t, logFile)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(lines), lines)
	}
	for _, m := range lines {
		if m["method"] != "GET" || m["path"] != "/items/42" || m["rule"] != "per-ip" || len(m["identity"]) != 16 {
			t.Errorf("line %v: want method GET, path /items/42, rule per-ip and a 16-digit hash", m)
		}
	}
	if lines[0]["identity"] != lines[1]["identity"] {
		t.Errorf("the caller's hash changed across a restart with key_file: %q, %q", lines[0]["identity"], lines[1]["identity"])
	}

	// sluice rls: the same key file, two processes, one hash.
	rules := t.TempDir()
	writeFile(t, rules, "rules.yaml", "domain: abuse\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 5}\n")
	rlsLog := filepath.Join(dir, "rls-access.log")
	for range 2 {
		r := startRLS(t, rules, "--access-log", rlsLog, "--access-log-key-file", filepath.Join(dir, "access.key"))
		r.decide(t, "abuse", 1, [][2]string{{"client", "alice"}})
		r.stop()
	}
	rl, _, _ := accessLines(t, rlsLog)
	if len(rl) != 2 || rl[0]["identity"] != rl[1]["identity"] || len(rl[0]["identity"]) != 16 {
		t.Errorf("rls lines %v: want two with one 16-digit hash", rl)
	}
}
