package abuse

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Access log bounds: at most accessRate lines a second, each at most
// accessMaxLine bytes, whatever the flood and its values' lengths.
const (
	accessRate    = 50
	accessFlood   = 2000
	accessMaxLine = 2 << 10
)

// accessLines reads an access log file: its lines parsed, checking each
// one's size, and the lines stamped in each second.
func accessLines(t *testing.T, file string) (lines []map[string]string, perSecond map[string]int, bytes int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	perSecond = map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("access log line %q: %v", sc.Text(), err)
		}
		if n := len(sc.Bytes()) + 1; n > accessMaxLine {
			t.Errorf("an access log line of %d bytes, want at most %d", n, accessMaxLine)
		}
		bytes += len(sc.Bytes()) + 1
		lines = append(lines, m)
		perSecond[m["time"][:19]]++
	}
	return lines, perSecond, bytes
}

// checkAccessBound fails t when a second has more than accessRate lines,
// or when the lines of victim (its hash, the identity of its first line)
// hold no refusal.
func checkAccessBound(t *testing.T, lines []map[string]string, perSecond map[string]int, bytes int) {
	t.Helper()
	t.Logf("%d decisions: %d lines, %d bytes of access log in %d seconds", accessFlood, len(lines), bytes, len(perSecond))
	for sec, n := range perSecond {
		if n > accessRate {
			t.Errorf("%s: %d lines, want at most %d a second", sec, n, accessRate)
		}
	}
	if len(lines) == 0 {
		t.Fatal("no access log line")
	}
	victim, denied := lines[0]["identity"], 0
	for _, m := range lines {
		if m["identity"] == victim && m["outcome"] == "denied" {
			denied++
		}
	}
	if len(victim) != 16 || denied == 0 {
		t.Errorf("the victim's hash %q: %d refusals found, want some", victim, denied)
	}
}

// Attack: a flood of requests, each with a long path and a long fresh
// caller key, against a gateway with an access log. One line per request
// would write as many lines as requests, each as long as the path: a
// flood becomes a full disk.
//
// Bound: the access log writes at most max_per_second lines a second (the
// rest are counted in sluice_gateway_access_log_dropped_total), each
// value cut to 256 bytes, the caller hashed; one caller's refusals are
// found by grepping its hash.
func TestAccessLogFloodServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "access.log")
	cfg := writeFile(t, dir, "gateway.yaml", fmt.Sprintf(`
upstream: builtin:echo
access_log: {file: %s, max_per_second: %d}
routes:
  - path: /
    rate_limits:
      - actions: [{request_headers: {header_name: X-Client, descriptor_key: client}}]
rules:
  domain: abuse
  descriptors:
    - key: client
      rate_limit: {name: per_client, algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`, logFile, accessRate))
	g := startServe(t, cfg)
	c := client(t)
	// The victim first, so that the first line is its own.
	if code, _, _ := do(t, c, "GET", g.url+"/", "X-Client", "victim"); code != http.StatusOK {
		t.Fatalf("the victim's first request: %d", code)
	}
	path := "/" + strings.Repeat("p", 8<<10)
	key := strings.Repeat("k", 4<<10)
	accessFloodCheck(t, g.proc, g.admin, "sluice_gateway_access_log_dropped_total", logFile, key, func(client string) error {
		_, _, _, err := tryDo(c, "GET", g.url+path, "X-Client", client)
		return err
	})
}

// Attack: the same against the RLS with --access-log: a flood of
// descriptors with long values.
//
// Bound: --access-log-rate lines a second at most (the rest counted in
// sluice_rls_access_log_dropped_total), each bounded, the store key
// hashed and the descriptor's values left out.
func TestAccessLogFloodRLS(t *testing.T) {
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "access.log")
	r := startRLS(t, redisRules(t, 1), "--access-log", logFile, "--access-log-rate", fmt.Sprint(accessRate))
	c := client(t)
	r.decide(t, "abuse", 1, [][2]string{{"k", "victim"}})
	value := strings.Repeat("v", 4<<10)
	accessFloodCheck(t, r.proc, r.http, "sluice_rls_access_log_dropped_total", logFile, value, func(v string) error {
		_, _, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", v}})
		return err
	})
}

// accessFloodCheck sends accessFlood decisions through send, every other
// one the victim's (the others a long fresh value), checks that some were
// dropped (the metric dropped on admin), stops p and checks the log.
func accessFloodCheck(t *testing.T, p *proc, admin, dropped, logFile, long string, send func(who string) error) {
	t.Helper()
	err := parallel(accessFlood, 8, func(i int) error {
		if i%2 == 1 {
			return send(fmt.Sprint(long, i))
		}
		return send("victim")
	})
	if err != nil {
		t.Fatal(err)
	}
	if scrape(t, admin).value(t, dropped) == 0 {
		t.Errorf("%s is 0 after a flood over the lines a second", dropped)
	}
	p.stop()
	lines, perSecond, bytes := accessLines(t, logFile)
	checkAccessBound(t, lines, perSecond, bytes)
	if strings.Contains(fmt.Sprint(lines), "victim") {
		t.Error("a caller's key or value in the clear in the access log")
	}
}
