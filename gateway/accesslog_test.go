package gateway_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// access_log writes a JSON line per decision, naming the rule, the
// outcome, the layer and the caller's hash (never the key or address in
// the clear); the in-flight cap's refusals have lines too.
func TestAccessLogE2E(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := start(t, dir, strings.Replace(baseConfig, "identity:\n", "access_log: {file: access.log}\nidentity:\n", 1))
	for range 4 {
		get(t, clientFrom(t, "127.0.0.2"), s.url+"/v1/x") // per-ip: 3 then a 429
	}
	get(t, clientFrom(t, "127.0.0.2"), s.url+"/v1/x", "X-API-Key", "key-alice")
	s.stop(t) // Close writes the lines waiting
	f, err := os.Open(filepath.Join(dir, "access.log"))
	must(t, err)
	defer f.Close()
	var lines []map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if strings.Contains(sc.Text(), "127.0.0.2") || strings.Contains(sc.Text(), "alice") {
			t.Errorf("clear identity in %s", sc.Text())
		}
		lines = append(lines, m)
	}
	var outcomes []string
	for _, m := range lines {
		outcomes = append(outcomes, m["rule"]+" "+m["outcome"]+" "+m["layer"])
		if m["server"] != "gateway" || len(m["identity"]) != 16 {
			t.Errorf("line %v: want server gateway and a 16-digit hash", m)
		}
	}
	want := "per-ip allowed rate_limit,per-ip allowed rate_limit,per-ip allowed rate_limit,per-ip denied rate_limit,per-user allowed rate_limit"
	if strings.Join(outcomes, ",") != want {
		t.Errorf("lines:\n%s\nwant\n%s", strings.Join(outcomes, ","), want)
	}
	if lines[0]["identity"] != lines[3]["identity"] || lines[0]["identity"] == lines[4]["identity"] {
		t.Errorf("identities %q %q %q: want the IP's the same twice, alice's another", lines[0]["identity"], lines[3]["identity"], lines[4]["identity"])
	}
}

func TestAccessLogConfig(t *testing.T) {
	for _, bad := range []struct{ yaml, want string }{
		{"access_log: {sample: 0.5}", "gateway.yaml:2: access_log.file"},
		{"access_log: {file: x, sample: 2}", "gateway.yaml:2: access_log.sample"},
		{"access_log: {file: x, identity: md5}", "gateway.yaml:2: access_log.identity"},
		{"access_log: {file: x, max_per_second: 0}", "gateway.yaml:2: access_log.max_per_second"},
		{"access_log: {file: x, bogus: 1}", `gateway.yaml:2: access_log: unknown field "bogus"`},
	} {
		_, err := gateway.Parse("gateway.yaml", []byte("upstream: builtin:echo\n"+bad.yaml+"\nroutes: [{path: /}]\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.yaml, err, bad.want)
		}
	}
	c, err := gateway.Parse("/etc/sluice/gateway.yaml", []byte("upstream: builtin:echo\naccess_log: {file: a.log, sample: 0.25, max_per_second: 10, identity: clear, refusals_only: true}\nroutes: [{path: /}]\n"))
	must(t, err)
	if a := c.AccessLog; a == nil || a.File != "/etc/sluice/a.log" || a.Sample != 0.25 || a.MaxPerSecond != 10 || !a.RefusalsOnly {
		t.Errorf("AccessLog = %+v", c.AccessLog)
	}
}
