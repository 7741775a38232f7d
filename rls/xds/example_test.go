package xds_test

import (
	"fmt"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/rls/xds"
)

// Convert reads a RateLimitConfig as Envoy Gateway serves it.
func ExampleConvert() {
	cfg, err := xds.Convert(&rlsconf.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http",
		Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "httproute/default/backend/rule/0/match/0",
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 3}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := cfg.Rules()[0]
	fmt.Println(cfg.Domain, r.Limit.Rate, r.Limit.Period)
	// Output: default/eg/http 3 1h0m0s
}
