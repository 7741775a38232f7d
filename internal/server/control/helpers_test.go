package control_test

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// counterValue reads sluice_admin_actions_total{action,result} from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, action, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_admin_actions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["action"] == action && l["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
