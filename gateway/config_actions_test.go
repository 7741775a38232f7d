package gateway_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/rules"
)

// TestParseNewActions: masked_remote_address, query_parameters,
// query_parameter_value_match and cookie parse into their httplimit
// actions, and those produce the entries Envoy would.
func TestParseNewActions(t *testing.T) {
	t.Parallel()
	src := `upstream: builtin:echo
routes:
  - path: /
    rate_limits:
      - actions:
          - masked_remote_address: {v4_prefix_mask_len: 24, v6_prefix_mask_len: 56}
          - masked_remote_address: {}
          - query_parameters: {query_parameter_name: user, descriptor_key: qu, skip_if_absent: true}
          - query_parameter_value_match:
              descriptor_value: export
              expect_match: true
              query_parameters:
                - {name: fmt, string_match: {exact: CSV, ignore_case: true}}
                - {name: page, string_match: {safe_regex: {regex: "[0-9]+"}}}
                - {name: debug, present_match: false}
                - {name: q}
                - {name: empty, string_match: {exact: ""}}
          - cookie: {cookie_name: sid, descriptor_key: session}
rules:
  domain: d
  descriptors:
    - key: masked_remote_address
      rate_limit: {unit: second, requests_per_unit: 1}
`
	cfg, err := gateway.Parse("gw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	acts := cfg.Routes[0].Descriptors[0].Actions
	if len(acts) != 5 {
		t.Fatalf("actions = %#v", acts)
	}
	if a := acts[0].(action.MaskedRemoteAddress); a != (action.MaskedRemoteAddress{V4PrefixMaskLen: 24, V6PrefixMaskLen: 56}) {
		t.Errorf("masked_remote_address = %#v", a)
	}
	if a := acts[1].(action.MaskedRemoteAddress); a != (action.MaskedRemoteAddress{}) {
		t.Errorf("masked_remote_address {} = %#v", a)
	}
	if a := acts[2].(action.QueryParameters); a != (action.QueryParameters{QueryParameterName: "user", DescriptorKey: "qu", SkipIfAbsent: true}) {
		t.Errorf("query_parameters = %#v", a)
	}
	if a := acts[4].(action.Cookie); a != (action.Cookie{CookieName: "sid", DescriptorKey: "session"}) {
		t.Errorf("cookie = %#v", a)
	}
	qvm := acts[3].(action.QueryParameterValueMatch)
	if qvm.DescriptorValue != "export" || qvm.DontExpectMatch || len(qvm.QueryParameters) != 5 ||
		qvm.QueryParameters[0].Exact != "CSV" || !qvm.QueryParameters[0].IgnoreCase ||
		qvm.QueryParameters[1].SafeRegex == nil || qvm.QueryParameters[2].Present == nil || *qvm.QueryParameters[2].Present {
		t.Errorf("query_parameter_value_match = %#v", qvm)
	}

	// The parsed actions, on requests.
	id := identity.Identity{IP: netip.MustParseAddr("2001:db8:aa:bbcc::1")}
	r := httptest.NewRequest("GET", "/x?fmt=csv&page=12&q=&user=bob&empty", nil)
	r.Header.Set("Cookie", "sid=s1")
	want := []rules.Entry{
		{Key: "masked_remote_address", Value: "2001:db8:aa:bb00::/56"},
		{Key: "masked_remote_address", Value: "2001:db8:aa:bbcc::1/128"},
		{Key: "qu", Value: "bob"},
		{Key: "query_match", Value: "export"},
		{Key: "session", Value: "s1"},
	}
	for i, a := range acts {
		if e, ok := a.Entry(r, id); !ok || e != want[i] {
			t.Errorf("action %d: Entry = %+v, %v; want %+v", i, e, ok, want[i])
		}
	}
	// page=12x fails the whole-value regex; debug present fails
	// present_match: false; q absent fails the name alone; empty=x fails
	// exact: "" (an empty value only, as in Envoy).
	for _, target := range []string{"/x?fmt=csv&page=12x&q&empty", "/x?fmt=csv&page=1&q&debug&empty", "/x?fmt=csv&page=1&empty=", "/x?fmt=csv&page=1&q&empty=x"} {
		if e, ok := qvm.Entry(httptest.NewRequest("GET", target, nil), id); ok {
			t.Errorf("%s: Entry = %+v, true; want the descriptor dropped", target, e)
		}
	}
}

// TestParseNewActionProblems: every bad field of the new actions is
// reported with its file:line and path, once; destination_cluster and
// source_cluster are refused with the reason and what to use instead.
func TestParseNewActionProblems(t *testing.T) {
	t.Parallel()
	src := `upstream: builtin:echo
routes:
  - path: /
    rate_limits:
      - actions:
          - masked_remote_address: {v4_prefix_mask_len: 33}
          - masked_remote_address: {v6_prefix_mask_len: 0}
          - masked_remote_address: {v4_prefix_mask_len: x, v5_prefix_mask_len: 8}
          - query_parameters: {query_parameter_name: user}
          - query_parameters: {query_parameter_name: user, descriptor_key: u, skip_if_absent: maybe}
          - query_parameter_value_match:
              query_parameters:
                - {string_match: {exact: a}}
                - {name: b, string_match: {exact: a, prefix: b}}
                - {name: c, string_match: {safe_regex: {regex: "a("}}}
                - {name: d, present_match: true, string_match: {exact: a}}
                - {name: e, string_match: {prefix: ""}}
          - query_parameter_value_match: {descriptor_value: v}
          - cookie: {cookie_name: "bad name", descriptor_key: s}
          - cookie: {descriptor_key: s}
          - destination_cluster: {}
          - source_cluster: {}
rules:
  domain: d
  descriptors:
    - key: masked_remote_address
      rate_limit: {unit: second, requests_per_unit: 1}
`
	_, err := gateway.Parse("gw.yaml", []byte(src))
	if err == nil {
		t.Fatal("Parse = nil, want errors")
	}
	p := "routes[0].rate_limits[0].actions"
	want := []string{
		"gw.yaml:6: " + p + "[0].masked_remote_address.v4_prefix_mask_len: want a whole number from 1 to 32, got \"33\"",
		"gw.yaml:7: " + p + "[1].masked_remote_address.v6_prefix_mask_len: a 0-bit mask puts every client in one key: use generic_key",
		"gw.yaml:8: " + p + "[2].masked_remote_address.v4_prefix_mask_len: want a whole number from 1 to 32",
		`gw.yaml:8: ` + p + `[2].masked_remote_address: unknown field "v5_prefix_mask_len"`,
		"gw.yaml:9: " + p + "[3].query_parameters: query_parameter_name and descriptor_key are required",
		"gw.yaml:10: " + p + "[4].query_parameters.skip_if_absent: want true or false",
		"gw.yaml:12: " + p + "[5].query_parameter_value_match: descriptor_value is required",
		"gw.yaml:13: " + p + "[5].query_parameter_value_match.query_parameters[0].name: missing query parameter name",
		"gw.yaml:14: " + p + "[5].query_parameter_value_match.query_parameters[1].string_match: want exactly one of exact, prefix, suffix, contains and safe_regex",
		"gw.yaml:15: " + p + "[5].query_parameter_value_match.query_parameters[2].string_match.safe_regex.regex: error parsing regexp: missing closing ): `a(`",
		"gw.yaml:16: " + p + "[5].query_parameter_value_match.query_parameters[3]: want string_match or present_match, not both",
		"gw.yaml:17: " + p + "[5].query_parameter_value_match.query_parameters[4].string_match.prefix: want a non-empty prefix",
		"gw.yaml:18: " + p + "[6].query_parameter_value_match.query_parameters: want at least one query parameter matcher",
		"gw.yaml:19: " + p + `[7].cookie.cookie_name: "bad name" is not a cookie name`,
		"gw.yaml:20: " + p + "[8].cookie: cookie_name and descriptor_key are required",
		"gw.yaml:21: " + p + "[9].destination_cluster: the gateway has no Envoy clusters (its routes have no names)",
		"gw.yaml:22: " + p + "[10].source_cluster: the gateway has no service cluster of its own",
	}
	got := err.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("Parse errors:\n%s\nlack %q", got, w)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != len(want) {
		t.Errorf("Parse reported %d problems, want %d:\n%s", n, len(want), got)
	}
}
