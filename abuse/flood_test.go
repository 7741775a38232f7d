package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// floodRules are the rules of the identity flood: per client, a token
// bucket of 3 an hour (its holders exhaust it) and a monthly quota of 10
// (its holders use half of it). A flood identity makes one request.
const floodRules = `
    - key: client
      rate_limit: {name: window, algorithm: token_bucket, unit: hour, requests_per_unit: 3}
    - key: generic_key
      value: monthly
      descriptors:
        - key: client
          quota: {period: month, limit: 10}
`

// floodDoor is one front door under the identity flood: ask sends one
// request of client on the window rule (quota false) or the quota rule.
type floodDoor struct {
	proc    *proc
	metrics string // base URL of /metrics
	ask     func(c *http.Client, client string, quota bool) (int, error)
}

// Attack: mint fresh identities (here a header the rules key on; in the
// wild, IPv6 addresses or sign-ups) until the memory store is full, so
// that its eviction drops the keys of other callers: an exhausted window,
// a used monthly quota, back to full.
//
// Bound: with max_keys K (here 512), 50 holders exhaust their window and
// use half their monthly quota, then 20·K fresh identities make one
// request each. None of the 50 is admitted on the window again, each
// gets exactly the rest of its quota, the keys held stay within K (when
// the store reports them), and the process's RSS grows by less than
// 16 MiB during the flood.
func TestIdentityFlood(t *testing.T) {
	t.Parallel()
	const maxKeys, holders = 512, 50
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		body := `
upstream: builtin:echo
routes:
  - path: /w
    rate_limits:
      - actions: [{request_headers: {header_name: X-Client, descriptor_key: client}}]
  - path: /q
    rate_limits:
      - actions: [{generic_key: {descriptor_value: monthly}}, {request_headers: {header_name: X-Client, descriptor_key: client}}]
rules:
  domain: abuse
  descriptors:` + floodRules
		// The setting's name is probed: the memory store's bound as a
		// config setting of sluice serve.
		var g *gatewayProc
		var first error
		for _, setting := range []string{fmt.Sprintf("max_keys: %d\n", maxKeys), fmt.Sprintf("memory: {max_keys: %d}\n", maxKeys)} {
			var err error
			if g, err = tryServe(t, writeFile(t, dir, "gateway.yaml", setting+body)); err == nil {
				first = nil
				break
			}
			if first == nil {
				first = err
			}
		}
		skipIfUnknown(t, first, "sluice serve has no max_keys setting for its memory store")
		c := client(t)
		identityFlood(t, floodDoor{g.proc, g.admin, func(c2 *http.Client, id string, quota bool) (int, error) {
			path := "/w"
			if quota {
				path = "/q"
			}
			code, _, _, err := tryDo(c2, "GET", g.url+path, "X-Client", id)
			return code, err
		}}, c, maxKeys, holders)
	})
	t.Run("rls", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, "rules.yaml", "domain: abuse\ndescriptors:"+floodRules)
		r, err := tryRLS(t, dir, "--max-keys", fmt.Sprint(maxKeys))
		skipIfUnknown(t, err, "sluice rls has no --max-keys flag for its memory store")
		c := &http.Client{Timeout: 10 * time.Second}
		identityFlood(t, floodDoor{r.proc, r.http, func(c2 *http.Client, id string, quota bool) (int, error) {
			d := [][2]string{{"client", id}}
			if quota {
				d = [][2]string{{"generic_key", "monthly"}, {"client", id}}
			}
			code, _, err := r.tryDecide(c2, "abuse", 1, d)
			return code, err
		}}, c, maxKeys, holders)
	})
}

func identityFlood(t *testing.T, d floodDoor, c *http.Client, maxKeys, holders int) {
	month := time.Now().UTC().Month()
	expect := func(id string, quota bool, want int) {
		t.Helper()
		code, err := d.ask(c, id, quota)
		if err != nil {
			t.Fatal(err)
		}
		if code != want {
			what := "window"
			if quota {
				what = "quota"
			}
			t.Errorf("%s on the %s rule: %d, want %d", id, what, code, want)
		}
	}
	for i := 0; i < holders; i++ {
		id := fmt.Sprintf("holder-%d", i)
		for j := 0; j < 3; j++ {
			expect(id, false, http.StatusOK)
		}
		expect(id, false, http.StatusTooManyRequests)
		for j := 0; j < 5; j++ {
			expect(id, true, http.StatusOK)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	flood := func(from, to int) {
		t.Helper()
		err := parallel(to-from, 8, func(i int) error {
			i += from
			code, err := d.ask(c, fmt.Sprintf("flood-%d", i), i%4 == 3)
			if err != nil {
				return err
			}
			if code >= 500 && code != http.StatusServiceUnavailable {
				return fmt.Errorf("flood request %d: %d", i, code)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	flood(0, 2*maxKeys) // the store is full
	before := d.proc.rss(t)
	start := time.Now()
	flood(2*maxKeys, 20*maxKeys)
	took := time.Since(start)
	after := d.proc.rss(t)

	for i := 0; i < holders; i++ {
		id := fmt.Sprintf("holder-%d", i)
		expect(id, false, http.StatusTooManyRequests)
		if time.Now().UTC().Month() != month {
			continue // a new month: a new quota, rightly
		}
		for j := 0; j < 5; j++ {
			expect(id, true, http.StatusOK)
		}
		expect(id, true, http.StatusTooManyRequests)
	}
	m := scrape(t, d.metrics)
	var held []string
	for s, v := range m.series {
		n := seriesName(s)
		if strings.HasSuffix(n, "_keys") && !strings.Contains(n, "max") {
			held = append(held, fmt.Sprintf("%s=%v", s, v))
			if v > float64(maxKeys) {
				t.Errorf("%s is %v after the flood, want at most max_keys %d", s, v, maxKeys)
			}
		}
	}
	t.Logf("%d fresh identities in %v; RSS %s -> %s; keys metrics %v; eviction metrics %v",
		18*maxKeys, took.Round(time.Millisecond), mib(before), mib(after), held, m.names("evict"))
	if after-before > 16<<20 {
		t.Errorf("RSS grew by %s during a flood of %d identities past max_keys %d, want under 16 MiB", mib(after-before), 18*maxKeys, maxKeys)
	}
}
