package abuse

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// floodRules are the rules of the identity flood, per client: a token
// bucket (window) that the holders exhaust, and a monthly quota of 10
// that they use half of. A flood identity makes one request.
//
// With cheap, the bucket holds 3 and refills 5 an hour (36 minutes from
// empty to full): a flood identity's key, one request of 3 used, is short
// state that costs little to forget, so the full store evicts the flood's
// own keys. Otherwise it holds 3 and refills 3 an hour: a flood key is a
// long-period quota (an hour) used past a quarter, which the store must
// not forget either, so it refuses new keys and the failure policy
// answers them.
func floodRules(cheap bool) string {
	rate := 3
	if cheap {
		rate = 5
	}
	return fmt.Sprintf(`
    - key: client
      rate_limit: {name: window, algorithm: token_bucket, unit: hour, requests_per_unit: %d, burst: 3}
    - key: generic_key
      value: monthly
      descriptors:
        - key: client
          quota: {period: month, limit: 10}
`, rate)
}

// floodGateway is the gateway config of the identity flood but for its
// upstream: /w is the window rule, /q the quota, per X-Client.
func floodGateway(maxKeys int, cheap bool) string {
	return fmt.Sprintf(`
max_keys: %d
routes:
  - path: /w
    rate_limits:
      - actions: [{request_headers: {header_name: X-Client, descriptor_key: client}}]
  - path: /q
    rate_limits:
      - actions: [{generic_key: {descriptor_value: monthly}}, {request_headers: {header_name: X-Client, descriptor_key: client}}]
rules:
  domain: abuse
  descriptors:`, maxKeys) + floodRules(cheap)
}

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
// Bound: with max_keys K (1024, the least the gateway takes), 50 holders
// exhaust their bucket and use half their monthly quota, then 10·K fresh
// identities make one request each — cheap ones (the store evicts them,
// sluice_store_evictions_total) and ones holding state the store must not
// forget (it refuses them, sluice_store_refusals_total, and the failure
// policy answers). None of the 50 is admitted on its bucket again, each
// gets exactly the rest of its quota, sluice_store_keys stays within K,
// and the process's RSS grows by less than 16 MiB during the flood.
func TestIdentityFlood(t *testing.T) {
	t.Parallel()
	const maxKeys, holders = 1024, 50
	for _, cheap := range []bool{true, false} {
		variant := "evict"
		if !cheap {
			variant = "refuse"
		}
		t.Run("serve/"+variant, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			g, err := tryServe(t, writeFile(t, dir, "gateway.yaml", "upstream: builtin:echo\n"+floodGateway(maxKeys, cheap)))
			skipIfUnknown(t, err, "sluice serve has no max_keys setting for its memory store")
			identityFlood(t, floodDoor{g.proc, g.admin, func(c *http.Client, id string, quota bool) (int, error) {
				path := "/w"
				if quota {
					path = "/q"
				}
				code, _, _, err := tryDo(c, "GET", g.url+path, "X-Client", id)
				return code, err
			}}, client(t), maxKeys, holders, cheap)
		})
		t.Run("rls/"+variant, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "rules.yaml", "domain: abuse\ndescriptors:"+floodRules(cheap))
			r, err := tryRLS(t, dir, "--max-keys", fmt.Sprint(maxKeys))
			skipIfUnknown(t, err, "sluice rls has no --max-keys flag for its memory store")
			identityFlood(t, floodDoor{r.proc, r.http, func(c *http.Client, id string, quota bool) (int, error) {
				d := [][2]string{{"client", id}}
				if quota {
					d = [][2]string{{"generic_key", "monthly"}, {"client", id}}
				}
				code, _, err := r.tryDecide(c, "abuse", 1, d)
				return code, err
			}}, &http.Client{Timeout: 10 * time.Second}, maxKeys, holders, cheap)
		})
	}
}

func identityFlood(t *testing.T, d floodDoor, c *http.Client, maxKeys, holders int, cheap bool) {
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
	var mu sync.Mutex
	answers := map[int]int{}
	flood := func(from, to int) {
		t.Helper()
		err := parallel(to-from, 8, func(i int) error {
			i += from
			code, err := d.ask(c, fmt.Sprintf("flood-%d", i), i%4 == 3)
			if err != nil {
				return err
			}
			mu.Lock()
			answers[code]++
			mu.Unlock()
			// 200, or the failure policy's answer to a refused key: 503
			// (the gateway's error), 500 (the RLS's error).
			if code != http.StatusOK && code != http.StatusServiceUnavailable && code != http.StatusInternalServerError {
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
	flood(2*maxKeys, 10*maxKeys)
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
	keys := m.value(t, "sluice_store_keys")
	if bound := m.value(t, "sluice_store_max_keys"); bound != float64(maxKeys) {
		t.Errorf("sluice_store_max_keys is %v, want max_keys %d", bound, maxKeys)
	}
	if keys > float64(maxKeys) {
		t.Errorf("sluice_store_keys is %v after the flood, want at most max_keys %d", keys, maxKeys)
	}
	evictions, refusals := m.value(t, "sluice_store_evictions_total"), m.value(t, "sluice_store_refusals_total")
	if cheap && evictions == 0 {
		t.Errorf("a flood of cheap keys past max_keys: no eviction counted")
	}
	if !cheap && refusals == 0 {
		t.Errorf("a flood of keys the store must keep, past max_keys: no refusal counted")
	}
	t.Logf("%d fresh identities in %v, answered %v; keys %v of %d, %v evictions, %v refusals; RSS %s -> %s",
		8*maxKeys, took.Round(time.Millisecond), answers, keys, maxKeys, evictions, refusals, mib(before), mib(after))
	if after-before > 16<<20 {
		t.Errorf("RSS grew by %s during a flood of %d identities past max_keys %d, want under 16 MiB", mib(after-before), 8*maxKeys, maxKeys)
	}
}
