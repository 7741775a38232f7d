package gateway_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
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
          - remote_adress: {}
rules:
  domain: d
  descriptors:
    - key: remote_address
      rate_limit: {unit: fortnight, requests_per_unit: 1}
`
	wantProblems(t, src, []string{
		"gw.yaml:2: upstream: want an http:// or https:// URL or builtin:echo",
		"gw.yaml:3: headers: want ietf, legacy or opaque",
		"gw.yaml:4: store: want memory or a redis://",
		`gw.yaml:5: unknown field "bogus"`,
		"gw.yaml:7: identity.trusted_proxies[1]: want an IP address or CIDR prefix",
		"gw.yaml:9: routes[0].path: want a path starting with /",
		`gw.yaml:10: routes[0].methods[1]: unknown HTTP method "FETCH"`,
		"gw.yaml:11: routes[0].cost: want a whole number from 1",
		"gw.yaml:15: routes[0].rate_limits[0].actions[1].generic_key: descriptor_value is required",
		`gw.yaml:16: routes[0].rate_limits[0].actions[2]: unknown field "remote_adress"`,
		`gw.yaml:21: rules.descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
	})
}

// wantProblems checks that parsing src as gw.yaml reports exactly the
// problems want, each a substring of one.
func wantProblems(t *testing.T, src string, want []string) {
	t.Helper()
	_, err := gateway.Parse("gw.yaml", []byte(src))
	var errs *rules.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse = %v, want *rules.Errors", err)
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
	want := []action.Action{
		action.RequestHeaders{HeaderName: "X-Tenant", DescriptorKey: "tenant", SkipIfAbsent: true},
		nil,
		action.IdentityKey{UserKey: "u", IPKey: "ip"},
		action.Tier{Default: "free"},
		action.Method{},
		action.Path{DescriptorKey: "p"},
	}
	if len(got) != len(want) {
		t.Fatalf("actions = %#v, want %d", got, len(want))
	}
	for i := range want {
		if i == 1 {
			hv := got[1].(action.HeaderValueMatch)
			if hv.DescriptorValue != "admin" || !hv.DontExpectMatch || len(hv.Headers) != 3 || hv.Headers[0].Exact != "yes" || hv.Headers[2].Prefix != "a" {
				t.Errorf("action 1 = %#v", hv)
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("action %d = %#v, want %#v", i, got[i], want[i])
		}
	}
	if cfg.Headers != header.Legacy || cfg.Routes[0].CostHeader != "X-Cost" || cfg.Domain != "d" {
		t.Errorf("cfg = headers %v cost header %q domain %q", cfg.Headers, cfg.Routes[0].CostHeader, cfg.Domain)
	}
}

func TestParseRoutesIdentityConnections(t *testing.T) {
	t.Parallel()
	src := `upstream: http://127.0.0.1:1
identity:
  strip_headers: [x-internal]
  forward_user_header: X-Auth-User
  hide_credentials: true
connections: {max: 10, idle_timeout: 5s, read_header_timeout: 2s, read_timeout: 3s, write_timeout: 4s, max_header_bytes: 8192}
admin_connections: {max: 2}
routes:
  - pattern: GET example.com/api/
  - path: /x
    host: example.com
    methods: [get]
`
	cfg, err := gateway.Parse("gw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ic := cfg.Identity
	if fmt.Sprint(ic.StripHeaders) != "[X-Internal]" || ic.ForwardUserHeader != "X-Auth-User" || ic.ForwardTierHeader != "X-Sluice-Tier" ||
		ic.ForwardKindHeader != "X-Sluice-Identity-Kind" || !ic.HideCredentials {
		t.Errorf("identity = %+v", ic)
	}
	want := gateway.ConnConfig{Max: 10, IdleTimeout: 5 * time.Second, ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout: 3 * time.Second, WriteTimeout: 4 * time.Second, MaxHeaderBytes: 8192}
	if cfg.Connections != want {
		t.Errorf("connections = %+v, want %+v", cfg.Connections, want)
	}
	wantAdmin := gateway.DefaultAdminConnections()
	wantAdmin.Max = 2
	if cfg.AdminConnections != wantAdmin {
		t.Errorf("admin_connections = %+v, want %+v", cfg.AdminConnections, wantAdmin)
	}
	if r := cfg.Routes[0]; r.Pattern != "GET example.com/api/" {
		t.Errorf("routes[0] = %+v", r)
	}
	if r := cfg.Routes[1]; r.Path != "/x" || r.Host != "example.com" || fmt.Sprint(r.Methods) != "[GET]" {
		t.Errorf("routes[1] = %+v", r)
	}

	// Defaults.
	cfg, err = gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\nroutes: [{path: /}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := gateway.DefaultConnections(); cfg.Connections != d || d.IdleTimeout != 75*time.Second || d.Max < 1 || d.Max > gateway.DefaultMaxConnections {
		t.Errorf("default connections = %+v (DefaultConnections %+v)", cfg.Connections, d)
	}
}

func TestParseRouteProblems(t *testing.T) {
	t.Parallel()
	src := `upstream: http://127.0.0.1:1
identity:
  strip_headers: ["bad header"]
connections: {max: 0, idle_timeout: soon}
routes:
  - pattern: GET /a
    path: /a
  - pattern: FETCH /b
  - path: /c
    methods: [CONNECT]
  - path: /d
    host: example.com:8080
  - methods: [GET]
`
	_, err := gateway.Parse("gw.yaml", []byte(src))
	want := []string{
		`gw.yaml:3: identity.strip_headers[0]: want a header name, got "bad header"`,
		"gw.yaml:4: connections.max: want a whole number from 1",
		"gw.yaml:4: connections.idle_timeout: want a positive duration",
		"gw.yaml:6: routes[0].pattern: pattern says method, host and path itself",
		`gw.yaml:8: routes[1].pattern: unknown HTTP method "FETCH"`,
		"gw.yaml:10: routes[2].methods[0]: CONNECT is not proxied",
		"gw.yaml:12: routes[3].host: want a host name without port",
		"gw.yaml:13: routes[4].path: missing path (or pattern)",
	}
	if err == nil {
		t.Fatal("Parse = nil, want errors")
	}
	got := err.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("Parse errors:\n%s\nlack %q", got, w)
		}
	}
	// Conflicting routes are refused, with both named.
	_, err = gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\nroutes:\n  - path: /a\n  - path: /b\n  - path: /a\n"))
	if err == nil || !strings.Contains(err.Error(), `gw.yaml:5: routes[2]: pattern "/a" conflicts with routes[0]`) {
		t.Errorf("duplicate routes: %v", err)
	}
}

// TestOnStoreErrorDefault: a config that says nothing fails open, as
// documented; fail_closed: true is error; the two contradicting is an
// error.
func TestOnStoreErrorDefault(t *testing.T) {
	base := "upstream: builtin:echo\nroutes:\n  - path: /\n"
	for _, tc := range []struct {
		extra string
		want  ratelimit.FailurePolicy
		bad   bool
	}{
		{"", ratelimit.FailAllow, false},
		{"on_store_error: deny\n", ratelimit.FailDeny, false},
		{"on_store_error: local\n", ratelimit.FailLocal, false},
		{"fail_closed: true\n", ratelimit.FailError, false},
		{"fail_closed: false\n", ratelimit.FailAllow, false},
		{"on_store_error: deny\nfail_closed: true\n", 0, true},
		{"on_store_error: open\n", 0, true},
	} {
		cfg, err := gateway.Parse("gw.yaml", []byte(base+tc.extra))
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: parsed, want an error", tc.extra)
		case !tc.bad && err != nil:
			t.Errorf("%q: %v", tc.extra, err)
		case !tc.bad && cfg.OnStoreError != tc.want:
			t.Errorf("%q: on_store_error %v, want %v", tc.extra, cfg.OnStoreError, tc.want)
		}
	}
}

func TestResetJitterConfig(t *testing.T) {
	base := "upstream: builtin:echo\nroutes:\n  - path: /\n"
	for extra, want := range map[string]float64{"": 0, "reset_jitter: 0.1\n": 0.1, "reset_jitter: 1\n": 1, "reset_jitter: 0\n": 0} {
		cfg, err := gateway.Parse("gw.yaml", []byte(base+extra))
		if err != nil || cfg.ResetJitter != want {
			t.Errorf("%q: %v, %v; want %v", extra, cfg, err, want)
		}
	}
	for _, bad := range []string{"reset_jitter: 1.5\n", "reset_jitter: -0.1\n", "reset_jitter: lots\n", "reset_jitter: \"0.1\"\n"} {
		if _, err := gateway.Parse("gw.yaml", []byte(base+bad)); err == nil || !strings.Contains(err.Error(), "gw.yaml:4: reset_jitter") {
			t.Errorf("%q: %v, want an error at gw.yaml:4", bad, err)
		}
	}
}
