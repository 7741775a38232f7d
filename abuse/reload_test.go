package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// watchInterval is the --watch-interval (serve) and --poll (rls) of the
// reload tests.
const watchInterval = 200 * time.Millisecond

// Attack (an operator's): a leaked API key is removed from the keys file,
// and keeps working until someone remembers to send SIGHUP.
//
// Bound: the removed key is answered 401 within the watch interval (plus
// the reload's own time), with no signal; the other keys keep working.
func TestKeyRevocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys.txt", keyLine("key-alice", "alice", "pro")+keyLine("key-mallory", "mallory", "pro"))
	cfg := writeFile(t, dir, "gateway.yaml", `
upstream: builtin:echo
identity:
  api_keys_file: keys.txt
routes:
  - path: /
`)
	g := startServe(t, cfg, "--watch-interval", watchInterval.String())
	c := client(t)
	for _, k := range []string{"key-alice", "key-mallory"} {
		if code, _, _ := do(t, c, "GET", g.url+"/", "X-Api-Key", k); code != http.StatusOK {
			t.Fatalf("%s before the revocation: %d", k, code)
		}
	}
	replaceFile(t, keys, keyLine("key-alice", "alice", "pro"))
	revoked := time.Now()
	// A bound on the wait for a loaded machine, not a timing assertion:
	// without the watcher the key is never refused (no SIGHUP is sent);
	// how soon it is is logged below.
	const bound = 2*watchInterval + 30*time.Second
	eventually(t, bound, func() error {
		if code, _, _ := do(t, c, "GET", g.url+"/", "X-Api-Key", "key-mallory"); code != http.StatusUnauthorized {
			return fmt.Errorf("the revoked key is answered %d, want 401 (watch interval %v)", code, watchInterval)
		}
		return nil
	})
	t.Logf("revoked key refused %v after the file changed (watch interval %v)", time.Since(revoked).Round(time.Millisecond), watchInterval)
	if code, _, _ := do(t, c, "GET", g.url+"/", "X-Api-Key", "key-alice"); code != http.StatusOK {
		t.Errorf("the key left in the file: %d, want 200", code)
	}
}

// Attack (an operator's, or a broken deploy's): a run of bad configs,
// each refused. Refusals that are not counted hide a deploy that never
// took effect; a refused config that replaced the good one would drop
// every limit.
//
// Bound: N refused configs, each different and each refused for another
// reason, add exactly N to the invalid reload counter (and log N
// refusals); the last good config keeps serving, its counters intact.
func TestRefusedReloadsCounted(t *testing.T) {
	t.Parallel()
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		good := `
upstream: builtin:echo
routes:
  - path: /
    rate_limits:
      - actions: [{generic_key: {descriptor_value: all}}]
rules:
  domain: abuse
  descriptors:
    - key: generic_key
      value: all
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 2}
`
		cfg := writeFile(t, dir, "gateway.yaml", good)
		g := startServe(t, cfg, "--watch-interval", watchInterval.String())
		c := client(t)
		for i := 0; i < 2; i++ {
			do(t, c, "GET", g.url+"/")
		}
		if code, _, _ := do(t, c, "GET", g.url+"/"); code != http.StatusTooManyRequests {
			t.Fatalf("third request under 2 an hour: %d", code)
		}
		bad := []string{
			"routes: [\n",               // YAML syntax
			good + "bogus_setting: 1\n", // unknown field
			strings.Replace(good, "builtin:echo", "ftp://x", 1),                       // invalid value
			good + "identity: {api_keys_file: missing-keys.txt}\n",                    // a file that cannot be read
			strings.Replace(good, "requests_per_unit: 2", "requests_per_unit: -2", 1), // invalid rule
			"", // empty
		}
		reloads := func() (ok, invalid float64) {
			m := scrape(t, g.admin)
			ok, _ = m.get("sluice_gateway_config_reloads_total", "result", "ok")
			invalid, _ = m.get("sluice_gateway_config_reloads_total", "result", "invalid")
			return ok, invalid
		}
		ok0, inv0 := reloads()
		start := time.Now()
		for i, b := range bad {
			replaceFile(t, cfg, b)
			eventually(t, 2*watchInterval+30*time.Second, func() error { // a bound, not a timing assertion
				if _, inv := reloads(); inv != inv0+float64(i+1) {
					return fmt.Errorf("after %d refused configs the invalid count rose by %v", i+1, inv-inv0)
				}
				return nil
			})
		}
		time.Sleep(3 * watchInterval) // nothing more is counted
		if ok, inv := reloads(); inv-inv0 != float64(len(bad)) || ok != ok0 {
			t.Errorf("%d refused configs: invalid rose by %v, ok by %v; want %d and 0", len(bad), inv-inv0, ok-ok0, len(bad))
		}
		logged := 0
		for _, l := range g.lines(start) {
			if strings.Contains(l, "config refused") {
				logged++
			}
		}
		if logged != len(bad) {
			t.Errorf("%d refused configs logged %d refusals, want one each", len(bad), logged)
		}
		if code, _, _ := do(t, c, "GET", g.url+"/"); code != http.StatusTooManyRequests {
			t.Errorf("after the refused configs: %d, want the good config's 429", code)
		}
	})
	t.Run("rls", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		good := `
domain: abuse
descriptors:
  - key: k
    rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 2}
`
		file := writeFile(t, dir, "rules.yaml", good)
		r := startRLS(t, dir, "--poll", watchInterval.String())
		for i := 0; i < 2; i++ {
			r.decide(t, "abuse", 1, [][2]string{{"k", "v"}})
		}
		if code := r.decide(t, "abuse", 1, [][2]string{{"k", "v"}}); code != http.StatusTooManyRequests {
			t.Fatalf("third request under 2 an hour: %d", code)
		}
		bad := []string{
			"descriptors: [\n",
			good + "bogus_setting: 1\n",
			strings.Replace(good, "requests_per_unit: 2", "requests_per_unit: -2", 1),
			strings.Replace(good, "unit: hour", "unit: fortnight", 1),
			"",
		}
		loads := func() (ok, invalid float64) {
			m := scrape(t, r.http)
			ok, _ = m.get("ratelimit_service_config_load_success")
			invalid, _ = m.get("ratelimit_service_config_load_error")
			return ok, invalid
		}
		ok0, inv0 := loads()
		for i, b := range bad {
			replaceFile(t, file, b)
			eventually(t, 2*watchInterval+30*time.Second, func() error { // a bound, not a timing assertion
				if _, inv := loads(); inv != inv0+float64(i+1) {
					return fmt.Errorf("after %d refused configs config_load_error rose by %v", i+1, inv-inv0)
				}
				return nil
			})
		}
		time.Sleep(3 * watchInterval)
		if ok, inv := loads(); inv-inv0 != float64(len(bad)) || ok != ok0 {
			t.Errorf("%d refused configs: config_load_error rose by %v, config_load_success by %v; want %d and 0", len(bad), inv-inv0, ok-ok0, len(bad))
		}
		if code := r.decide(t, "abuse", 1, [][2]string{{"k", "v"}}); code != http.StatusTooManyRequests {
			t.Errorf("after the refused configs: %d, want the good config's 429", code)
		}
	})
}
