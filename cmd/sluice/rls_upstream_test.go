package main

import (
	"errors"
	"io"
	"testing"

	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
)

// TestRLSUpstreamFlags checks the flags that follow envoyproxy/ratelimit's
// settings: --metric-labels, --headers envoy with --limit-header-names, and
// --stop-increment-when-over-limit and --quota-mode.
func TestRLSUpstreamFlags(t *testing.T) {
	base := []string{"--config-dir", "."}
	parse := func(args ...string) (*rlsFlags, error) {
		return parseRLSFlags(append(append([]string{}, base...), args...), io.Discard)
	}
	f, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if f.metricLabels != rls.MetricLabelsEnvoy || f.headers != header.Off || f.headerNames != (header.Names{}) {
		t.Errorf("defaults: labels %v, headers %v, names %+v; want envoy labels and no headers", f.metricLabels, f.headers, f.headerNames)
	}
	if f, err = parse("--metric-labels", "sluice"); err != nil || f.metricLabels != rls.MetricLabelsSluice {
		t.Errorf("--metric-labels sluice: %v, %v", f, err)
	}
	if f, err = parse("--headers", "envoy"); err != nil || f.headers != header.Legacy || f.headerNames != header.EnvoyNames {
		t.Errorf("--headers envoy: %+v, %v", f, err)
	}
	f, err = parse("--headers", "envoy", "--limit-header-names", "X-L,,X-R")
	want := header.EnvoyNames
	want.Limit, want.Reset = "X-L", "X-R"
	if err != nil || f.headerNames != want {
		t.Errorf("--limit-header-names X-L,,X-R: %+v, %v; want %+v", f, err, want)
	}
	if f, err = parse(); err != nil || f.stopIncrement {
		t.Errorf("--stop-increment-when-over-limit is on by default")
	}
	if f, err = parse("--stop-increment-when-over-limit"); err != nil || !f.stopIncrement {
		t.Errorf("--stop-increment-when-over-limit: %+v, %v", f, err)
	}
	if f, err = parse("--quota-mode"); err != nil || !f.quotaMode {
		t.Errorf("--quota-mode: %+v, %v", f, err)
	}
	for _, args := range [][]string{
		{"--metric-labels", "statsd"},
		{"--limit-header-names", "a,b"},
		{"--limit-header-names", "a,b c,d"},
	} {
		if _, err := parse(args...); !errors.Is(err, errUsage) {
			t.Errorf("sluice rls %v = %v, want a usage error", args, err)
		}
	}
}
