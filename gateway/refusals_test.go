package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Every layer's refusal reaches the status page, the metrics and the
// aggregated log, not only the rate limits': an in-flight 429, an
// adaptive 503 and a fleet shed 503 each show as a denial on their row of
// /status.json, with who or what was refused, and in
// sluice_gateway_refusals_total, and in the access log with the request's
// method and path.
func TestStatusShowsEveryLayersRefusalsE2E(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	dir := t.TempDir()
	s := start(t, dir, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
admin_token_file: token.txt
access_log: {file: access.log, refusals_only: true}
in_flight: {max: 1}
shedding:
  fleet: {cap: 3, reserved: 0}
routes:
  - path: /adaptive/
    adaptive: {algorithm: gradient, initial: 1, min: 1, max: 1}
  - path: /
`, up.URL), "token.txt", adminToken+"\n")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer up.Release()
	hold := func(ip, path string) {
		wg.Add(1)
		go func() { defer wg.Done(); do(t, clientFrom(t, ip), "GET", s.url+path) }()
		<-up.entered
	}
	hold("127.0.7.1", "/slow") // the fleet: 1 of 3
	if r := do(t, clientFrom(t, "127.0.7.1"), "GET", s.url+"/fast"); r.code != http.StatusTooManyRequests {
		t.Fatalf("a second request of a caller at in_flight max 1: %d %s, want 429", r.code, r.body)
	}
	hold("127.0.7.2", "/adaptive/slow") // 2 of 3
	if r := do(t, clientFrom(t, "127.0.7.3"), "GET", s.url+"/adaptive/fast"); r.code != http.StatusServiceUnavailable {
		t.Fatalf("a request over the adaptive limit of 1: %d %s, want 503", r.code, r.body)
	}
	hold("127.0.7.4", "/slow") // 3 of 3
	if r := do(t, clientFrom(t, "127.0.7.5"), "GET", s.url+"/fast"); r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "shed") {
		t.Fatalf("a request with the fleet at its cap: %d %s, want 503 shed", r.code, r.body)
	}
	p := statusJSON(t, s, "")
	// Admitted: the fleet let through all but the last request (5), the
	// in-flight cap all it saw but the second (4), the adaptive limit one.
	for _, want := range []struct {
		row     string
		allowed uint64
		who     string
	}{
		{"in-flight", 4, "inflight:ip:127.0.7.1"},
		{"adaptive", 1, "routes[0] /adaptive/"},
		{"shed", 5, "fleet:get"},
	} {
		r := ruleOf(t, p, want.row)
		if r.Denied != 1 || r.Allowed != want.allowed || len(r.TopDenied) != 1 || r.TopDenied[0].Who != want.who {
			t.Errorf("row %s: allowed %d denied %d, top %+v; want %d allowed and 1 denial of %s", want.row, r.Allowed, r.Denied, r.TopDenied, want.allowed, want.who)
		}
	}
	// The rows are not rules: the admin API does not take them.
	if r := adminCall(t, s, "POST", "/admin/enforce", adminToken, `{"rule":"in-flight","percent":50}`); r.code != http.StatusBadRequest {
		t.Errorf("enforce on the in-flight row: %d %s, want 400 (no such rule)", r.code, r.body)
	}
	m := get(t, http.DefaultClient, s.admin+"/metrics").body
	for _, want := range []string{
		`sluice_gateway_refusals_total{cause="over_limit",layer="in_flight"} 1`,
		`sluice_gateway_refusals_total{cause="over_limit",layer="adaptive"} 1`,
		`sluice_gateway_refusals_total{cause="over_limit",layer="shed"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	up.Release()
	wg.Wait()
	s.stop(t) // Close writes the lines waiting
	b, err := os.ReadFile(filepath.Join(dir, "access.log"))
	must(t, err)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m["layer"]+" "+m["method"]+" "+m["path"])
	}
	if want := "in_flight GET /fast,adaptive GET /adaptive/fast,shed GET /fast"; strings.Join(got, ",") != want {
		t.Errorf("access log refusals:\n%s\nwant\n%s", strings.Join(got, ","), want)
	}
}
