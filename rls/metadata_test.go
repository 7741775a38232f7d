package rls_test

import (
	"context"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// TestResponseDynamicMetadata: as envoyproxy/ratelimit's
// RESPONSE_DYNAMIC_METADATA, an answer carries the domain, the
// descriptors and the merged metadata of the rules that passed; a rule
// over its limit adds none; off by default.
func TestResponseDynamicMetadata(t *testing.T) {
	const file = `
domain: d
descriptors:
  - key: a
    metadata: {team: search, tags: {tier: gold}}
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    metadata: {team: billing, tags: {pager: true}, owner: ops}
    rate_limit: {unit: minute, requests_per_unit: 5}
`
	cfg, err := rules.Parse("f.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	req := &pb.RateLimitRequest{Domain: "d", HitsAddend: 1, Descriptors: []*commonpb.RateLimitDescriptor{
		{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "a", Value: "1"}}},
		{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "b", Value: "2"}}, HitsAddend: wrapperspb.UInt64(1)},
	}}
	off, _ := rls.New(memstore.New(memstore.Options{}), set, rls.Options{})
	defer off.Close()
	if resp, _ := off.ShouldRateLimit(context.Background(), req); resp.GetDynamicMetadata() != nil {
		t.Errorf("dynamic metadata without the option: %v", resp.GetDynamicMetadata())
	}
	srv, _ := rls.New(memstore.New(memstore.Options{}), set, rls.Options{ResponseDynamicMetadata: true})
	defer srv.Close()
	resp, err := srv.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.GetDynamicMetadata().AsMap()
	if m["domain"] != "d" || m["hitsAddend"] != float64(1) {
		t.Errorf("domain, hitsAddend: %v", m)
	}
	descs, _ := m["descriptors"].([]any)
	if len(descs) != 2 || descs[0].(map[string]any)["entries"].([]any)[0] != "a=1" || descs[1].(map[string]any)["hitsAddend"] != float64(1) {
		t.Errorf("descriptors: %v", m["descriptors"])
	}
	// Both passed: a's metadata first, then b's where a set nothing;
	// mappings merge.
	md, _ := m["metadata"].(map[string]any)
	tags, _ := md["tags"].(map[string]any)
	if md["team"] != "search" || md["owner"] != "ops" || tags["tier"] != "gold" || tags["pager"] != true {
		t.Errorf("merged metadata: %v", md)
	}
	// a is now over its limit: only b's metadata.
	resp, _ = srv.ShouldRateLimit(context.Background(), req)
	md, _ = resp.GetDynamicMetadata().AsMap()["metadata"].(map[string]any)
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || md["team"] != "billing" {
		t.Errorf("with a over: %v, metadata %v", resp.OverallCode, md)
	}
}
