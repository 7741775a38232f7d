package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// egMapperYAML is the conf.yaml of Envoy Gateway's statsd-exporter-config
// ConfigMap (abuse/testdata/envoy-gateway).
func egMapperYAML(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "abuse", "testdata", "envoy-gateway", "statsd-exporter-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil || cm.Data["conf.yaml"] == "" {
		t.Fatalf("ConfigMap: %v, %q", err, cm.Data)
	}
	return cm.Data["conf.yaml"]
}

// TestStatsdMapper: Envoy Gateway's mapping file (upstream's default
// mapping) is taken, reordered too; a file that maps differently, lacks
// a mapping or has one more, or that sluice cannot weigh, is refused
// naming the mapping and its line.
func TestStatsdMapper(t *testing.T) {
	eg := egMapperYAML(t)
	lines := strings.Split(strings.TrimSpace(eg), "\n")
	reordered := append([]string{lines[0]}, lines[1:]...)
	reordered[1], reordered[len(reordered)-1] = reordered[len(reordered)-1], reordered[1]
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"Envoy Gateway's":   {eg, ""},
		"reordered":         {strings.Join(reordered, "\n"), ""},
		"with scale":        {strings.Replace(eg, `"name": "ratelimit_service_response_time_seconds",`, `"name": "ratelimit_service_response_time_seconds", "scale": 0.001,`, 1), ""},
		"a label renamed":   {strings.Replace(eg, `"key1": "$2"}}`, `"route": "$2"}}`, 1), `:2: match "ratelimit.service.rate_limit.*.*.near_limit" (glob) -> ratelimit_service_rate_limit_near_limit{domain=$1,route=$2} is not in the default mapping`},
		"a mapping dropped": {strings.Join(append([]string{lines[0]}, lines[2:]...), "\n"), `the default mapping's match "ratelimit.service.rate_limit.*.*.near_limit" (glob)`},
		"one more":          {eg + "\n  - {match: \"a.*\", name: \"a\"}\n", `match "a.*" (glob) -> a{} is not in the default mapping`},
		"dropped by action": {strings.Replace(eg, `"timer_type": "histogram",`, `"action": "drop",`, 1), "action drop is not in the default mapping"},
		"regex by default":  {"defaults: {match_type: regex}\n" + eg, "(regex)"},
		"unknown field":     {strings.Replace(eg, `"timer_type": "histogram",`, `"match_kind": "x",`, 1), "match_kind: the default mapping has no such field"},
		"unknown key":       {eg + "extra: 1\n", "extra: not a key of the default mapping"},
		"not YAML":          {"mappings: [", "conf.yaml: yaml:"},
	} {
		path := filepath.Join(dir, "conf.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		err := checkStatsdMapper(path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if err := checkStatsdMapper(filepath.Join(dir, "absent.yaml")); err == nil {
		t.Error("a missing file was taken")
	}

	// Through the environment: taken with a note, or refused naming why.
	path := filepath.Join(dir, "eg.yaml")
	if err := os.WriteFile(path, []byte(eg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, notes, err := ReadUpstreamEnv(mapLookup(map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": path}), nil)
	if err != nil || !strings.Contains(strings.Join(notes, "\n"), "PROMETHEUS_MAPPER_YAML: no effect: the file is upstream's default mapping") {
		t.Errorf("Envoy Gateway's mapping: %v, notes %q", err, notes)
	}
}
