package runner

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/transport/h2grpc"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
)

// parseRLSFlags parses args as sluice rls's flags (but the command's own,
// --log-*) and checks them.
func parseRLSFlags(args []string, stderr io.Writer) (*Config, error) {
	fs := flag.NewFlagSet("sluice rls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &Config{}
	f.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	return f, nil
}

// TestRLSUpstreamFlags checks the flags that follow envoyproxy/ratelimit's
// settings: --metric-labels, --headers envoy with --limit-header-names, and
// --stop-increment-when-over-limit and --quota-mode.
func TestRLSUpstreamFlags(t *testing.T) {
	base := []string{"--config-dir", "."}
	parse := func(args ...string) (*Config, error) {
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
		if _, err := parse(args...); !errors.Is(err, ErrUsage) {
			t.Errorf("sluice rls %v = %v, want a usage error", args, err)
		}
	}
}

// TestRLSStatsFlags checks --local-cache-size-bytes and the --statsd
// flags, and refuses their bad values as usage errors.
func TestRLSStatsFlags(t *testing.T) {
	parse := func(args ...string) (*Config, error) {
		return parseRLSFlags(append([]string{"--config-dir", "."}, args...), io.Discard)
	}
	f, err := parse()
	if err != nil || f.stats.localCacheSize != 0 || f.stats.statsd != "" || f.stats.flush != 10*time.Second {
		t.Fatalf("defaults: %+v, %v; want no cache, no statsd, a 10s flush", f.stats, err)
	}
	f, err = parse("--local-cache-size-bytes", "1048576", "--statsd", "tcp://127.0.0.1:8125",
		"--statsd-tags", "a:b,c:d", "--statsd-prefix", "fleet", "--statsd-flush-interval", "2s")
	if err != nil || f.stats.localCacheSize != 1<<20 || f.stats.tags["a"] != "b" || f.stats.tags["c"] != "d" ||
		f.stats.prefix != "fleet" || f.stats.flush != 2*time.Second {
		t.Errorf("flags: %+v, %v", f.stats, err)
	}
	// The deprecated --deny-cache is the local cache: of DenyCacheSize
	// bytes, unless --local-cache-size-bytes says.
	if f, err = parse("--deny-cache"); err != nil || f.stats.localCacheSize != DenyCacheSize {
		t.Errorf("--deny-cache: local cache %d bytes, %v; want %d", f.stats.localCacheSize, err, DenyCacheSize)
	}
	if f, err = parse("--deny-cache", "--local-cache-size-bytes", "1048576"); err != nil || f.stats.localCacheSize != 1<<20 {
		t.Errorf("--deny-cache --local-cache-size-bytes 1048576: local cache %d bytes, %v", f.stats.localCacheSize, err)
	}
	for _, args := range [][]string{
		{"--local-cache-size-bytes", "-1"},
		{"--statsd", "nohost"},
		{"--statsd", "sctp://127.0.0.1:1"},
		{"--statsd", "127.0.0.1:8125", "--statsd-tags", "novalue"},
		{"--statsd", "127.0.0.1:8125", "--statsd-tags", "a.b:c"},
		{"--statsd-flush-interval", "0s"},
	} {
		if _, err := parse(args...); !errors.Is(err, ErrUsage) {
			t.Errorf("sluice rls %v = %v, want a usage error", args, err)
		}
	}
}

// TestRLSStreamLimits: the stream flags reach h2grpc's Options (both
// servers take them from there), their defaults are h2grpc's, and 0 is no
// bound.
func TestRLSStreamLimits(t *testing.T) {
	for _, c := range []struct {
		args []string
		want h2grpc.StreamLimits
	}{
		{nil, h2grpc.StreamLimits{RequestTimeout: h2grpc.DefaultRequestTimeout, WriteTimeout: h2grpc.DefaultWriteTimeout,
			ResetRate: h2grpc.DefaultResetRate, ResetBurst: h2grpc.DefaultResetBurst}},
		{[]string{"--grpc-request-timeout", "2s", "--grpc-write-timeout", "3s", "--grpc-reset-rate", "50", "--grpc-reset-burst", "70"},
			h2grpc.StreamLimits{RequestTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, ResetRate: 50, ResetBurst: 70}},
		{[]string{"--grpc-request-timeout", "0", "--grpc-write-timeout", "0", "--grpc-reset-rate", "0"},
			h2grpc.StreamLimits{RequestTimeout: -1, WriteTimeout: -1, ResetRate: -1, ResetBurst: h2grpc.DefaultResetBurst}},
	} {
		f, err := parseRLSFlags(append([]string{"--config-dir", "x"}, c.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := f.tr.transport(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := leanOptions(tr, nil).StreamLimits; got != c.want {
			t.Errorf("%q: %+v, want %+v", c.args, got, c.want)
		}
	}
}
