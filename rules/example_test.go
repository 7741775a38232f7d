package rules_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/rules"
)

func ExampleParse() {
	cfg, err := rules.Parse("edge.yaml", []byte(`
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  # Block one address.
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ip := range []string{"50.0.0.1", "50.0.0.5"} {
		r := cfg.Match([]rules.Entry{{Key: "remote_address", Value: ip}})
		fmt.Println(ip, "→", r.Key, r.Limit, r.Algorithm)
	}
	// Output:
	// 50.0.0.1 → edge_proxy_per_ip.remote_address 10/1s fixed_window
	// 50.0.0.5 → edge_proxy_per_ip.remote_address_50.0.0.5 0/1s fixed_window
}

func ExampleParse_errors() {
	_, err := rules.Parse("rules.yaml", []byte(`domain: api
descriptors:
  - key: user
    ratelimit:
      unit: second
  - key: ip
    rate_limit:
      unit: minutes
      requests_per_unit: 100
`))
	var errs *rules.Errors
	if errors.As(err, &errs) {
		for _, p := range *errs {
			fmt.Println(p)
		}
	}
	// Output:
	// rules.yaml:4: descriptors[0]: unknown field "ratelimit" (did you mean "rate_limit"?)
	// rules.yaml:8: descriptors[1].rate_limit.unit: unknown unit "minutes" (want second, minute, hour, day, week, month or year)
}

func ExampleConfig_Match() {
	cfg, _ := rules.Parse("api.yaml", []byte(`
domain: api
descriptors:
  - key: tier
    value: free
    descriptors:
      - key: identity
        rate_limit:
          algorithm: token_bucket
          unit: second
          requests_per_unit: 10
          burst: 20
`))
	r := cfg.Match([]rules.Entry{{Key: "tier", Value: "free"}, {Key: "identity", Value: "user:42"}})
	fmt.Println(r)
	fmt.Println(cfg.Match([]rules.Entry{{Key: "tier", Value: "free"}}))
	// Output:
	// api.tier_free.identity: 10/1s burst 20 token_bucket
	// <no rule>
}
