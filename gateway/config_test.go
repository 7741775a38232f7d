package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rules"
)

func TestDefaultConfigParses(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Default()
	if err != nil {
		t.Fatalf("Default() = %v", err)
	}
	if cfg.Upstream != gateway.BuiltinEcho || cfg.Store != "memory" || cfg.Domain != "sluice" || len(cfg.Identity.TrustedProxies) != 0 {
		t.Errorf("Default() = upstream %q store %q domain %q trusted %v; want builtin:echo, memory, sluice, none trusted",
			cfg.Upstream, cfg.Store, cfg.Domain, cfg.Identity.TrustedProxies)
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	src := `listen: 127.0.0.1:0
upstream: ftp://example.com
headers: x-ratelimit
store: mongodb://x
bogus: 1
identity:
  trusted_proxies: [10.0.0.0/8, not-an-ip]
routes:
  - path: api
    methods: [GET, FETCH]
    cost: 0
    rate_limits:
      - actions:
          - remote_address: {}
          - generic_key: {}
          - masked_remote_address: {}
rules:
  domain: d
  descriptors:
    - key: remote_address
      rate_limit: {unit: fortnight, requests_per_unit: 1}
`
	_, err := gateway.Parse("gw.yaml", []byte(src))
	var errs *rules.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse = %v, want *rules.Errors", err)
	}
	want := []string{
		"gw.yaml:2: upstream: want an http:// or https:// URL or builtin:echo",
		"gw.yaml:3: headers: want ietf, legacy or opaque",
		"gw.yaml:4: store: want memory or a redis://",
		`gw.yaml:5: unknown field "bogus"`,
		"gw.yaml:7: identity.trusted_proxies[1]: want an IP address or CIDR prefix",
		"gw.yaml:9: routes[0].path: want a path starting with /",
		`gw.yaml:10: routes[0].methods[1]: unknown HTTP method "FETCH"`,
		"gw.yaml:11: routes[0].cost: want a whole number from 1",
		"gw.yaml:15: routes[0].rate_limits[0].actions[1].generic_key: descriptor_value is required",
		`gw.yaml:16: routes[0].rate_limits[0].actions[2]: unknown field "masked_remote_address"`,
		`gw.yaml:21: rules.descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
	}
	got := err.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("Parse errors:\n%s\nlack %q", got, w)
		}
	}
	if n := len(*errs); n != len(want) {
		t.Errorf("Parse reported %d problems, want %d:\n%s", n, len(want), got)
	}
}

func TestParseActions(t *testing.T) {
	t.Parallel()
	src := `upstream: http://127.0.0.1:1
headers: legacy
routes:
  - path: /
    cost_header: X-Cost
    rate_limits:
      - actions:
          - request_headers: {header_name: X-Tenant, descriptor_key: tenant, skip_if_absent: true}
          - header_value_match:
              descriptor_value: admin
              expect_match: false
              headers: [{name: X-Admin, exact_match: "yes"}, {name: X-Debug, present_match: true}, {name: X-S, string_match: {prefix: a}}]
          - identity: {user_key: u, ip_key: ip}
          - tier: {default: free}
          - method: {}
          - path: {descriptor_key: p}
rules:
  domain: d
  descriptors:
    - key: u
      rate_limit: {unit: second, requests_per_unit: 1}
`
	cfg, err := gateway.Parse("gw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Routes[0].Descriptors[0].Actions
	want := []httplimit.Action{
		httplimit.RequestHeaders{HeaderName: "X-Tenant", DescriptorKey: "tenant", SkipIfAbsent: true},
		nil,
		httplimit.IdentityKey{UserKey: "u", IPKey: "ip"},
		httplimit.Tier{Default: "free"},
		httplimit.Method{},
		httplimit.Path{DescriptorKey: "p"},
	}
	if len(got) != len(want) {
		t.Fatalf("actions = %#v, want %d", got, len(want))
	}
	for i := range want {
		if i == 1 {
			hv := got[1].(httplimit.HeaderValueMatch)
			if hv.DescriptorValue != "admin" || !hv.DontExpectMatch || len(hv.Headers) != 3 || hv.Headers[0].Exact != "yes" || hv.Headers[2].Prefix != "a" {
				t.Errorf("action 1 = %#v", hv)
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("action %d = %#v, want %#v", i, got[i], want[i])
		}
	}
	if cfg.Headers != httplimit.Legacy || cfg.Routes[0].CostHeader != "X-Cost" || cfg.Domain != "d" {
		t.Errorf("cfg = headers %v cost header %q domain %q", cfg.Headers, cfg.Routes[0].CostHeader, cfg.Domain)
	}
}
