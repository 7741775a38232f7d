package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefundConfig: sluice check refuses a bad refund_budget and an
// unknown refund_on name at their lines, and warns about a refund_budget
// on a route that refunds nothing.
func TestCheckRefundConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, route string
		fails       bool
		want        string // check's output, after "FILE:"
	}{
		{"budget.yaml", "    refund_on: [503]\n    refund_budget: 2\n", true,
			`5: routes[0].refund_budget: want a fraction of the limit above 0 and at most 1, such as 0.5, got "2"`},
		{"name.yaml", "    refund_on: [gateway_timeout]\n", true,
			`4: routes[0].refund_on[0]: want a status code (503), a range (500-599), a class (5xx), upstream_timeout or upstream_unreachable, got "gateway_timeout"`},
		{"alone.yaml", "    refund_budget: 0.5\n", false,
			`4: routes[0].refund_budget: warning: refund_budget without refund_on: nothing is refunded`},
	} {
		name := filepath.Join(dir, tc.name)
		writeFiles(t, dir, tc.name, checkGW+tc.route)
		out, err := runCheckArgs(t, name)
		if (err != nil) != tc.fails || !strings.HasPrefix(out, name+":"+tc.want+"\n") {
			t.Errorf("check %s = %v, output:\n%s\nwant:\n%s:%s", tc.name, err, out, name, tc.want)
		}
	}
}
