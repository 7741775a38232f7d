package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/server/status"
)

func statusJSON(t *testing.T, s *server, query string) status.Page {
	t.Helper()
	r := get(t, http.DefaultClient, s.admin+"/status.json"+query)
	if r.code != 200 {
		t.Fatalf("status.json: %d %s", r.code, r.body)
	}
	var p status.Page
	must(t, json.Unmarshal([]byte(r.body), &p))
	return p
}

func ruleOf(t *testing.T, p status.Page, name string) status.RuleStatus {
	t.Helper()
	for _, r := range p.Rules {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no rule %q on the page: %+v", name, p.Rules)
	return status.RuleStatus{}
}

// A flood from one address puts it first on the page and in the JSON, on
// the next refresh; the lookup box peeks it without charging.
func TestStatusShowsFloodedIdentityFirst(t *testing.T) {
	t.Parallel()
	s := start(t, "", baseConfig)
	flood, other := clientFrom(t, "127.0.3.9"), clientFrom(t, "127.0.3.10")
	codes(t, flood, s.url+"/", 20)
	codes(t, other, s.url+"/", 5)
	codes(t, other, s.url+"/", 1, "X-API-Key", "key-bob")
	p := statusJSON(t, s, "")
	ip := ruleOf(t, p, "per-ip")
	if len(ip.TopDenied) != 2 || ip.TopDenied[0].Who != "remote_address=127.0.3.9" || ip.TopDenied[0].Count != 17 || ip.TopDenied[1].Count != 2 {
		t.Errorf("got top denied %+v, want 127.0.3.9 with 17 then 127.0.3.10 with 2", ip.TopDenied)
	}
	if ip.Allowed != 6 || ip.Denied != 19 || ip.Limit != "3/1h0m0s" || ip.Quota != 3 || ip.Window != 3600 {
		t.Errorf("got per-ip %+v, want 6 allowed 19 denied of 3/1h", ip)
	}
	if u := ruleOf(t, p, "per-user"); u.Allowed != 1 || u.Denied != 0 {
		t.Errorf("got per-user %+v", u)
	}
	if !p.Store.OK || p.Store.URL != "memory" || p.Store.FailurePolicy != "allow" {
		t.Errorf("got store %+v", p.Store)
	}
	// The page: the flooded address is the first row of per-ip's table.
	page := get(t, http.DefaultClient, s.admin+"/status?identity=ip:127.0.3.9")
	sec := page.body[strings.Index(page.body, `id="rule-per-ip"`):]
	first := regexp.MustCompile(`<td class="who">([^<]*)</td>`).FindStringSubmatch(sec)
	if first == nil || first[1] != "remote_address=127.0.3.9" {
		t.Errorf("got first row %q on the page, want remote_address=127.0.3.9", first)
	}
	// The lookup peeks: twice the same, and nothing charged.
	for range 2 {
		p = statusJSON(t, s, "?identity=127.0.3.10")
		if p.Lookup == nil || len(p.Lookup.Peeks) != 1 || p.Lookup.Peeks[0].Name != "per-ip" || p.Lookup.Peeks[0].Rule != "t.remote_address" || p.Lookup.Peeks[0].Remaining != 0 {
			t.Fatalf("got lookup %+v", p.Lookup)
		}
	}
	p = statusJSON(t, s, "?identity=user:bob")
	if p.Lookup == nil || len(p.Lookup.Peeks) != 1 || p.Lookup.Peeks[0].Name != "per-user" || p.Lookup.Peeks[0].Remaining != 4 {
		t.Errorf("got bob's lookup %+v, want per-user with 4 left", p.Lookup)
	}
	if p := statusJSON(t, s, "?identity=ip:nope"); p.Lookup == nil || p.Lookup.Error == "" {
		t.Errorf("a bad identity got no error: %+v", p.Lookup)
	}
}

// A shadow rule's would-be denials are who it would have blocked.
func TestStatusShadowWouldHaveBlocked(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(baseConfig, "    - key: remote_address\n", "    - key: remote_address\n      shadow_mode: true\n", 1)
	s := start(t, "", cfg)
	if got := codes(t, clientFrom(t, "127.0.3.20"), s.url+"/", 5); fmt.Sprint(got) != "[200 200 200 200 200]" {
		t.Fatalf("got %v from a shadow rule", got)
	}
	ip := ruleOf(t, statusJSON(t, s, ""), "per-ip")
	if !ip.Shadow || ip.EnforcePercent != 0 || ip.ShadowDenied != 2 || len(ip.TopShadowDenied) != 1 || ip.TopShadowDenied[0].Who != "remote_address=127.0.3.20" {
		t.Errorf("got %+v, want 127.0.3.20 would have been blocked twice", ip)
	}
}

var rateLimitRE = regexp.MustCompile(`"per-ip";r=(\d+);t=(\d+)`)

// /rate_limit tells what the next request's headers say, and reading it
// charges nothing.
func TestRateLimitEndpoint(t *testing.T) {
	t.Parallel()
	s := start(t, "", "rate_limit_endpoint: /rate_limit\n"+baseConfig)
	c := clientFrom(t, "127.0.3.30")
	type res struct {
		Limit, Remaining, Used, Reset, Window int64
		Policy, Algorithm                     string
	}
	read := func(hdr ...string) (map[string]res, string) {
		r := get(t, c, s.url+"/rate_limit", hdr...)
		if r.code != 200 {
			t.Fatalf("/rate_limit: %d %s", r.code, r.body)
		}
		var out struct {
			Identity  string
			Resources map[string]res
		}
		must(t, json.Unmarshal([]byte(r.body), &out))
		return out.Resources, out.Identity
	}
	before, who := read()
	again, _ := read()
	// Reset is a Unix time in whole seconds: two reads may straddle a
	// second and differ by one. Everything else must not change.
	noReset := func(r res) res { r.Reset = 0; return r }
	if d := again["per-ip"].Reset - before["per-ip"].Reset; d < 0 || d > 1 {
		t.Errorf("Reset moved from %d to %d between two reads", before["per-ip"].Reset, again["per-ip"].Reset)
	}
	if who != "ip:127.0.3.30" || len(before) != 1 || before["per-ip"].Remaining != 3 || noReset(before["per-ip"]) != noReset(again["per-ip"]) {
		t.Fatalf("got %s %+v then %+v, want per-ip with 3 left, unchanged", who, before, again)
	}
	for i := range 4 {
		rl, _ := read()
		r := get(t, c, s.url+"/x")
		want := rl["per-ip"]
		if pol := r.h.Get("RateLimit-Policy"); pol != fmt.Sprintf(`"per-ip";q=%d;w=%d`, want.Limit, want.Window) {
			t.Errorf("request %d: got RateLimit-Policy %q, want q=%d w=%d", i, pol, want.Limit, want.Window)
		}
		m := rateLimitRE.FindStringSubmatch(r.h.Get("RateLimit"))
		if want.Remaining == 0 {
			if r.code != 429 {
				t.Errorf("request %d: /rate_limit said 0 left, got %d", i, r.code)
			}
			continue
		}
		if m == nil || r.code != 200 {
			t.Fatalf("request %d: got %d RateLimit %q", i, r.code, r.h.Get("RateLimit"))
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n != want.Remaining-1 {
			t.Errorf("request %d: got r=%d after /rate_limit said %d remaining", i, n, want.Remaining)
		}
		if want.Used != want.Limit-want.Remaining || want.Reset < time.Now().Unix()-1 {
			t.Errorf("request %d: got %+v", i, want)
		}
	}
	// An authenticated caller sees its user rule.
	if rs, who := read("X-API-Key", "key-alice"); who != "user:alice" || rs["per-user"].Limit != 5 || rs["per-user"].Remaining != 5 {
		t.Errorf("alice: got %s %+v", who, rs)
	}
	if r := get(t, c, s.url+"/rate_limit", "X-API-Key", "wrong"); r.code != 401 {
		t.Errorf("bad key: got %d, want 401", r.code)
	}
	// Limited against abuse: 20 at once, then 429 with Retry-After.
	n429 := 0
	for range 30 {
		if r := get(t, c, s.url+"/rate_limit"); r.code == 429 {
			n429++
			if r.h.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
	}
	if n429 == 0 {
		t.Error("/rate_limit is not limited")
	}
}

const adminToken = "test-admin-token-0123456789"

func adminCall(t *testing.T, s *server, method, path, token, body string) resp {
	t.Helper()
	req, err := http.NewRequest(method, s.admin+path, strings.NewReader(body))
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	return resp{res.StatusCode, res.Header, string(b)}
}

func TestAdminAPIRefusedWithoutToken(t *testing.T) {
	t.Setenv(control.TokenEnv, "")
	s := start(t, "", baseConfig)
	if r := adminCall(t, s, "POST", "/admin/reset", "", `{"identity":"127.0.0.1"}`); r.code != 403 || !strings.Contains(r.body, "disabled") {
		t.Errorf("got %d %s, want 403 disabled", r.code, r.body)
	}
}

// Two gateways on one Redis: a reset, an override with an expiry and a
// percentage enforcement made through one hold in the other.
func TestAdminAPITwoGatewaysOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	t.Setenv(control.TokenEnv, "")
	rs := redistest.Start(t)
	cfg := strings.Replace(baseConfig, "upstream: builtin:echo", "upstream: builtin:echo\nstore: "+rs.URL()+"\nadmin_token_file: token.txt", 1)
	a := start(t, "", cfg, "token.txt", adminToken+"\n")
	b := start(t, "", cfg, "token.txt", adminToken+"\n")

	// No token, a wrong one: 401.
	for _, tok := range []string{"", "wrong-token-wrong-token"} {
		if r := adminCall(t, a, "POST", "/admin/reset", tok, `{"identity":"127.0.3.40"}`); r.code != 401 {
			t.Errorf("token %q: got %d, want 401", tok, r.code)
		}
	}

	// Reset in a, seen by b.
	c := clientFrom(t, "127.0.3.40")
	if got := codes(t, c, a.url+"/", 4); fmt.Sprint(got) != "[200 200 200 429]" {
		t.Fatalf("got %v", got)
	}
	if r := get(t, c, b.url+"/"); r.code != 429 {
		t.Fatalf("b: got %d, want the shared 429", r.code)
	}
	if r := adminCall(t, a, "POST", "/admin/reset", adminToken, `{"identity":"ip:127.0.3.40","rule":"per-ip"}`); r.code != 200 {
		t.Fatalf("reset: %d %s", r.code, r.body)
	}
	if got := codes(t, c, b.url+"/", 4); fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("b after a's reset: got %v, want a full bucket [200 200 200 429]", got)
	}

	// An override in a, for 3 s, used by b; then it expires.
	c = clientFrom(t, "127.0.3.41")
	if r := adminCall(t, a, "POST", "/admin/override", adminToken, `{"identity":"127.0.3.41","rule":"per-ip","rate":10,"period":"1h","ttl":"3s"}`); r.code != 200 {
		t.Fatalf("override: %d %s", r.code, r.body)
	}
	peek := func(s *server) status.Peek {
		p := statusJSON(t, s, "?identity=127.0.3.41")
		if p.Lookup == nil || len(p.Lookup.Peeks) != 1 {
			t.Fatalf("got lookup %+v", p.Lookup)
		}
		return p.Lookup.Peeks[0]
	}
	eventually(t, "b sees the override", func() bool { return peek(b).Override != "" })
	if got := codes(t, c, b.url+"/", 6); fmt.Sprint(got) != "[200 200 200 200 200 200]" {
		t.Errorf("b under a 10/h override: got %v, want 6 allowed (the rule allows 3)", got)
	}
	if p := peek(b); p.Limit != "10/1h0m0s" || p.Remaining != 4 {
		t.Errorf("b's peek under the override: %+v", p)
	}
	eventually(t, "the override expires", func() bool { return peek(b).Override == "" && peek(a).Override == "" })
	if p := peek(b); p.Limit != "3/1h0m0s" {
		t.Errorf("after expiry: got limit %s, want the rule's 3/1h", p.Limit)
	}
	if r := get(t, c, b.url+"/"); r.code != 429 {
		t.Errorf("after expiry: got %d, want 429 (6 used of the rule's 3)", r.code)
	}

	// Percentage enforcement set in a, applied by b: each of 40 addresses
	// sends 4 requests; the 4th is denied exactly for the addresses the
	// stable hash enforces, and a shadow denial is counted for the others.
	if r := adminCall(t, a, "POST", "/admin/enforce", adminToken, `{"rule":"per-ip","percent":50}`); r.code != 200 {
		t.Fatalf("enforce: %d %s", r.code, r.body)
	}
	eventually(t, "b sees the enforcement", func() bool { return ruleOf(t, statusJSON(t, b, ""), "per-ip").EnforcePercent == 50 })
	enforced, shadowed := 0, 0
	for i := range 40 {
		ip := "127.0.4." + strconv.Itoa(i+1)
		got := codes(t, clientFrom(t, ip), b.url+"/", 4)
		want := control.Enforced("t.remote_address", "t_remote%5Faddress_"+ip+"_", 50) // by the rule's ID
		if want {
			enforced++
		} else {
			shadowed++
		}
		if (got[3] == 429) != want || got[2] != 200 {
			t.Errorf("%s: got %v, enforced %v", ip, got, want)
		}
	}
	if enforced == 0 || shadowed == 0 {
		t.Errorf("50%% split 40 addresses %d enforced, %d shadowed", enforced, shadowed)
	}
	if ip := ruleOf(t, statusJSON(t, b, ""), "per-ip"); ip.ShadowDenied != uint64(shadowed) {
		t.Errorf("got %d shadow denials, want %d", ip.ShadowDenied, shadowed)
	}
	r := adminCall(t, b, "GET", "/admin/state", adminToken, "")
	if r.code != 200 || !strings.Contains(r.body, `"percent": 50`) || !strings.Contains(r.body, `"shared": true`) {
		t.Errorf("state: %d %s", r.code, r.body)
	}
	if r := adminCall(t, b, "DELETE", "/admin/enforce", adminToken, `{"rule":"per-ip"}`); r.code != 200 {
		t.Errorf("delete enforce: %d %s", r.code, r.body)
	}
	eventually(t, "a sees the enforcement deleted", func() bool { return ruleOf(t, statusJSON(t, a, ""), "per-ip").EnforcePercent == 100 })
	if m := metric(t, a, `sluice_admin_actions_total{action="reset",result="unauthorized"}`); m != "2" {
		t.Errorf("got %q unauthorized resets counted, want 2", m)
	}
}
