package rls_test

import (
	"os"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// WriteConfig prints the rules as /rlconfig serves them on the debug
// listener: one line per rule, as envoyproxy/ratelimit's /rlconfig, then
// what sluice adds.
func ExampleWriteConfig() {
	cfg, err := rules.Parse("edge.yaml", []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-client, unit: minute, requests_per_unit: 100}
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 20}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unlimited: true}
`))
	if err != nil {
		panic(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		panic(err)
	}
	rls.WriteConfig(os.Stdout, set)
	// Output:
	// edge.remote_address: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false, name: per-client (edge.yaml:3)
	// edge.api_key: unit=SECOND requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm: gcra, burst: 20 (edge.yaml:5)
	// edge.remote_address_10.0.0.1: unlimited, shadow_mode: false, quota_mode: false (edge.yaml:7)
}
