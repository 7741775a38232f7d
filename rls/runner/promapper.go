package runner

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// PROMETHEUS_MAPPER_YAML names a statsd_exporter mapping file that
// envoyproxy/ratelimit's Prometheus sink applies to its stats. sluice has
// no statsd mapper: its /metrics names and labels are those of upstream's
// default mapping (src/stats/prom/default_mapper.yaml), built in. Envoy
// Gateway mounts that same mapping (its statsd-exporter-config ConfigMap,
// conf.yaml, the default without the response time's scale) and sets
// PROMETHEUS_MAPPER_YAML to it in every Deployment it generates with
// Prometheus on (its default). So a file is accepted when its mappings
// are the default mapping's, whatever their order, spelling or timer
// options (sluice exports no timer), and refused otherwise, naming the
// first mapping that differs.

// statsdMapping is what of one mapping decides a series' name and labels.
type statsdMapping struct {
	Match      string            `yaml:"match"`
	MatchType  string            `yaml:"match_type"`
	Name       string            `yaml:"name"`
	Labels     map[string]string `yaml:"labels"`
	MetricType string            `yaml:"match_metric_type"`
	Action     string            `yaml:"action"`
}

func (m statsdMapping) String() string {
	labels := slices.Sorted(maps.Keys(m.Labels))
	for i, k := range labels {
		labels[i] = k + "=" + m.Labels[k]
	}
	s := fmt.Sprintf("match %q (%s) -> %s{%s}", m.Match, m.MatchType, m.Name, strings.Join(labels, ","))
	if m.MetricType != "" {
		s += " for " + m.MetricType + "s"
	}
	if m.Action != "" && m.Action != "map" {
		s += " action " + m.Action
	}
	return s
}

// defaultStatsdMappings are the mappings of upstream's default mapping,
// which sluice's /metrics builds in (rls/metrics.go).
func defaultStatsdMappings() []statsdMapping {
	var out []statsdMapping
	stats := []string{"near_limit", "over_limit", "total_hits", "within_limit", "shadow_mode"}
	for _, s := range stats {
		out = append(out, statsdMapping{Match: "ratelimit.service.rate_limit.*.*." + s, MatchType: "glob",
			Name: "ratelimit_service_rate_limit_" + s, Labels: map[string]string{"domain": "$1", "key1": "$2"}})
	}
	for _, s := range stats {
		out = append(out, statsdMapping{Match: `ratelimit\.service\.rate_limit\.([^\.]*)\.([^\.]*)\.([^\.]*)(\..*)?\.` + s, MatchType: "regex",
			Name: "ratelimit_service_rate_limit_" + s, Labels: map[string]string{"domain": "$1", "key1": "$2", "key2": "$3"}})
	}
	return append(out,
		statsdMapping{Match: "ratelimit.service.call.should_rate_limit.*", MatchType: "glob", Name: "ratelimit_service_should_rate_limit_error",
			MetricType: "counter", Labels: map[string]string{"err_type": "$1"}},
		statsdMapping{Match: "ratelimit_server.*.total_requests", MatchType: "glob", Name: "ratelimit_service_total_requests",
			MetricType: "counter", Labels: map[string]string{"grpc_method": "$1"}},
		statsdMapping{Match: "ratelimit_server.*.response_time", MatchType: "glob", Name: "ratelimit_service_response_time_seconds",
			Labels: map[string]string{"grpc_method": "$1"}},
		statsdMapping{Match: "ratelimit.service.config_load_success", MatchType: "glob", Name: "ratelimit_service_config_load_success", MetricType: "counter"},
		statsdMapping{Match: "ratelimit.service.config_load_error", MatchType: "glob", Name: "ratelimit_service_config_load_error", MetricType: "counter"},
	)
}

// timerOnly are the mapping fields that shape timers and histograms only,
// of which sluice exports none, and the help text.
var timerOnly = []string{"timer_type", "observer_type", "buckets", "quantiles", "histogram_options", "summary_options", "scale", "ttl", "help"}

// checkStatsdMapper reads the mapping file at path and returns nil when
// its mappings are the default mapping's.
func checkStatsdMapper(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Defaults map[string]any `yaml:"defaults"`
		Mappings []yaml.Node    `yaml:"mappings"`
		Rest     map[string]any `yaml:",inline"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if len(doc.Rest) > 0 {
		return fmt.Errorf("%s: %s: not a key of the default mapping", path, strings.Join(slices.Sorted(maps.Keys(doc.Rest)), ", "))
	}
	matchType := "glob"
	for k, v := range doc.Defaults {
		switch {
		case k == "match_type":
			matchType = fmt.Sprint(v)
		case k == "glob_disable_ordering" || slices.Contains(timerOnly, k):
		default:
			return fmt.Errorf("%s: defaults.%s: the default mapping has none", path, k)
		}
	}
	want := defaultStatsdMappings()
	var errs []error
	for _, n := range doc.Mappings {
		m, err := decodeMapping(&n, matchType)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %v", path, n.Line, err))
			continue
		}
		i := slices.IndexFunc(want, func(w statsdMapping) bool { return sameMapping(m, w) })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s:%d: %s is not in the default mapping", path, n.Line, m))
			continue
		}
		want = slices.Delete(want, i, i+1)
	}
	for _, w := range want {
		errs = append(errs, fmt.Errorf("%s: the default mapping's %s is missing", path, w))
	}
	return errors.Join(errs...)
}

// decodeMapping reads one mapping, refusing a field sluice cannot weigh.
func decodeMapping(n *yaml.Node, matchType string) (statsdMapping, error) {
	var m statsdMapping
	var fields map[string]any
	if err := n.Decode(&fields); err != nil {
		return m, err
	}
	for k := range fields {
		switch k {
		case "match", "match_type", "name", "labels", "match_metric_type", "action":
		default:
			if !slices.Contains(timerOnly, k) {
				return m, fmt.Errorf("%s: the default mapping has no such field", k)
			}
		}
	}
	if err := n.Decode(&m); err != nil {
		return m, err
	}
	if m.MatchType == "" {
		m.MatchType = matchType
	}
	return m, nil
}

func sameMapping(a, b statsdMapping) bool {
	action := func(s string) string {
		if s == "" {
			return "map"
		}
		return s
	}
	return a.Match == b.Match && a.MatchType == b.MatchType && a.Name == b.Name && maps.Equal(a.Labels, b.Labels) &&
		a.MetricType == b.MetricType && action(a.Action) == action(b.Action)
}
