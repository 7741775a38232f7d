package gateway_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/server/control"
)

// TestStatusPageEnforcedColumn: a shadow rule the admin API enforces on
// 10%, then 100%, shows that percentage in the page's Enforced column, as
// in /status.json (the page said "shadow" whatever the percentage); by its
// ID or by its name.
func TestStatusPageEnforcedColumn(t *testing.T) {
	t.Setenv(control.TokenEnv, "")
	cfg := strings.Replace(baseConfig, "    - key: user\n", "    - key: user\n      shadow_mode: true\n", 1)
	cfg = strings.Replace(cfg, "upstream: builtin:echo", "upstream: builtin:echo\nadmin_token_file: token.txt", 1)
	s := start(t, "", cfg, "token.txt", adminToken+"\n")
	cell := regexp.MustCompile(`<a href="#rule-per-user">per-user</a>.*?</td><td>.*?</td><td>.*?</td>\s*<td(?: class="enforced")?>(?:<span class="shadow">)?([^<]*)`)
	for _, c := range []struct{ rule, percent, want string }{
		{"", "", "shadow"},
		{"per-user", "10", "10%"},
		{"t.user", "100", "100%"},
	} {
		if c.rule != "" {
			if r := adminCall(t, s, "POST", "/admin/enforce", adminToken, `{"rule":"`+c.rule+`","percent":`+c.percent+`}`); r.code != 200 {
				t.Fatalf("enforce %s %s: %d %s", c.rule, c.percent, r.code, r.body)
			}
		}
		page := get(t, http.DefaultClient, s.admin+"/status")
		m := cell.FindStringSubmatch(strings.ReplaceAll(page.body, "\n", " "))
		if m == nil || m[1] != c.want {
			t.Errorf("after enforce %s %s: got Enforced %q, want %q", c.rule, c.percent, m, c.want)
		}
		if got := ruleOf(t, statusJSON(t, s, ""), "per-user").EnforcePercent; c.percent != "" && got != map[string]float64{"10": 10, "100": 100}[c.percent] {
			t.Errorf("status.json enforce_percent = %v, want %s", got, c.percent)
		}
	}
}
