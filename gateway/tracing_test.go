package gateway_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/server/accesslog"
)

// TestTracingConfig: tracing: decodes, and a bad value names its file and
// line.
func TestTracingConfig(t *testing.T) {
	base := "upstream: builtin:echo\nroutes: [{path: /}]\n"
	cfg, err := gateway.Parse("g.yaml", []byte(base+"tracing: {protocol: grpc, service_name: edge, sampling_rate: 0.25, identity: hashed}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tc := cfg.Tracing; tc == nil || tc.Protocol != "grpc" || tc.ServiceName != "edge" || tc.SamplingRate != 0.25 {
		t.Errorf("tracing %+v", cfg.Tracing)
	}
	if tc := cfg.Tracing; tc != nil && tc.Identity != accesslog.Hashed {
		t.Errorf("tracing identity %v, want hashed", tc.Identity)
	}
	// Spans name no one unless asked; the access log hashes by default.
	if cfg, _ := gateway.Parse("g.yaml", []byte(base+"tracing: {}\naccess_log: {file: a.log}\n")); cfg == nil || cfg.Tracing.Identity != accesslog.None || cfg.AccessLog.Identity != accesslog.Hashed {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg, _ := gateway.Parse("g.yaml", []byte(base+"tracing: {}\n")); cfg == nil || cfg.Tracing.SamplingRate != -1 {
		t.Errorf("tracing: {} is not on with the sampler of OTEL_TRACES_SAMPLER: %+v", cfg)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"tracing: {protocol: zipkin}", "g.yaml:3: tracing.protocol: want grpc or http/protobuf"},
		{"tracing: {sampling_rate: 2}", "g.yaml:3: tracing.sampling_rate"},
		{"tracing: {identity: plain}", "g.yaml:3: tracing.identity: want none, hashed or clear"},
		{"tracing: {sampler: always}", `g.yaml:3: tracing: unknown field "sampler"`},
	} {
		if _, err := gateway.Parse("g.yaml", []byte(base+tc.yaml+"\n")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
