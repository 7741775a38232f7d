package gateway_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/rules"
)

// FuzzParse: any input is either a config or a *rules.Errors with at
// least one problem, and never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(baseConfig))
	f.Add(gateway.DefaultYAML())
	f.Add([]byte("upstream: builtin:echo\nroutes: [{path: /, rate_limits: [{actions: [{header_value_match: {descriptor_value: x, headers: [{name: a}]}}]}]}]\n"))
	f.Add([]byte("rules: {domain: d, descriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]}\nupstream: builtin:echo\nroutes: [{path: /}]\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := gateway.Parse("fuzz.yaml", data)
		if err != nil {
			var errs *rules.Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("Parse error %v is not a non-empty *rules.Errors", err)
			}
			return
		}
		if cfg.Upstream == "" || len(cfg.Routes) == 0 {
			t.Fatalf("Parse accepted a config without upstream or routes: %+v", cfg)
		}
	})
}
