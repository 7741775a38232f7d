package gateway_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/rules"
)

// The gateway's config and the rules files are read by one walker: the
// same merge keys, booleans, node budget, problem cap and wording.

func TestParseMergeKeys(t *testing.T) {
	t.Parallel()
	src := `upstream: builtin:echo
routes:
  - &api
    path: /api
    cost: 3
    upstream_timeout: 5s
  - <<: *api
    path: /v2
rules:
  domain: d
  descriptors:
    - key: a
      rate_limit: &rl {unit: second, requests_per_unit: 5}
    - key: b
      rate_limit: {<<: *rl, requests_per_unit: 6}
`
	cfg, err := gateway.Parse("gw.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if len(cfg.Routes) != 2 {
		t.Fatalf("%d routes, want 2", len(cfg.Routes))
	}
	if r := cfg.Routes[1]; r.Path != "/v2" || r.Cost != 3 || r.UpstreamTimeout != 5*time.Second {
		t.Errorf("merged route = path %q cost %d timeout %v; want /v2, 3 and 5s from <<: *api", r.Path, r.Cost, r.UpstreamTimeout)
	}
	if r := cfg.Rules.Config("d").Match([]rules.Entry{{Key: "b", Value: "x"}}); r == nil || r.Limit.Rate != 6 || r.Limit.Period != time.Second {
		t.Errorf("merged rule = %+v, want 6 per second", r)
	}
}

func TestParseYAML11Booleans(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\npprof: yes\nshadow:\nroutes: [{path: /}]\n"))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if !cfg.Pprof || cfg.Shadow {
		t.Errorf("pprof: yes, shadow: (null) = %v, %v; want true, false as in the rules files", cfg.Pprof, cfg.Shadow)
	}
	_, err = gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\npprof: 'yes'\nroutes: [{path: /}]\n"))
	if err == nil || err.Error() != `gw.yaml:2: pprof: want true or false, got "yes"` {
		t.Errorf("quoted yes: %v", err)
	}
}

func TestParseUnknownFieldWording(t *testing.T) {
	t.Parallel()
	_, err := gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\nroutes: [{path: /, zzzz: 1}]\n"))
	want := `gw.yaml:2: routes[0]: unknown field "zzzz" (want cost, cost_header, host, methods, path, pattern, rate_limits or upstream_timeout)`
	if err == nil || !strings.HasPrefix(err.Error(), strings.SplitN(want, "(", 2)[0]) || !strings.Contains(err.Error(), " or ") {
		t.Errorf("Parse = %v\nwant like %s", err, want)
	}
}

func TestParseTooManyProblems(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("upstream: builtin:echo\nroutes:\n  - path: /\n    methods:\n")
	for i := range 2 * yamlnode.MaxProblems {
		fmt.Fprintf(&b, "      - BAD%d\n", i)
	}
	_, err := gateway.Parse("gw.yaml", []byte(b.String()))
	var errs *rules.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse = %v, want *rules.Errors", err)
	}
	if got := len(*errs); got != yamlnode.MaxProblems+1 {
		t.Errorf("len(problems) = %d, want %d", got, yamlnode.MaxProblems+1)
	}
	// As the rules parser says it: the line where the walk stopped, last.
	if last := (*errs)[len(*errs)-1].Error(); last != "gw.yaml:105: too many problems: stopped after 100" {
		t.Errorf("last problem = %q", last)
	}
}

func TestParseAliasBomb(t *testing.T) {
	t.Parallel()
	// 100 rate limits of 100 actions of 100 header matchers: 10^6
	// matchers from a 3 KB file.
	aliases := func(name string) string {
		return strings.TrimSuffix(strings.Repeat("*"+name+", ", 99), ", ")
	}
	h := "[&h {name: x-a, exact_match: b}, " + aliases("h") + "]"
	act := "[&act {header_value_match: {descriptor_value: x, headers: " + h + "}}, " + aliases("act") + "]"
	rl := "[&rl {actions: " + act + "}, " + aliases("rl") + "]"
	src := "upstream: builtin:echo\nrules: {domain: d, descriptors: [{key: x, rate_limit: {unit: second, requests_per_unit: 1}}]}\n" +
		"routes:\n  - path: /a\n    rate_limits: " + rl + "\n"
	// The node budget, not the clock, is the bound: the walk stops at
	// MaxNodes expanded nodes and says so (a timing check here failed on a
	// loaded machine while proving nothing more).
	_, err := gateway.Parse("gw.yaml", []byte(src))
	want := fmt.Sprintf("gw.yaml: file too large: more than %d YAML nodes once aliases are expanded", yamlnode.MaxNodes)
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v, want %s", err, want)
	}
}
