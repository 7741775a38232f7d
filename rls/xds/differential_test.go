package xds_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rls/xds"
	"github.com/sluicehq/sluice/rules"
)

// diffYAML and diffConfig are one rule set written twice, by hand: as
// the file an operator writes and as the RateLimitConfig a management
// server pushes. Every descriptor field of upstream's proto is in it,
// quota_mode and metadata (fields 7 and 8) on several.
const diffYAML = `
domain: diff
descriptors:
  - key: quota_a
    rate_limit: {unit: minute, requests_per_unit: 2}
    quota_mode: true
    metadata: {bucket: a, weight: 1.5}
  - key: quota_b
    rate_limit: {unit: week, requests_per_unit: 3}
    quota_mode: true
    metadata: {bucket: b, tags: [x, "yes"], nested: {n: 1, none: null}}
  - key: regular
    rate_limit: {unit: second, requests_per_unit: 4}
    metadata: {kind: regular, nested: {m: 2}}
    detailed_metric: true
  - key: path
    value: /api
    descriptors:
      - key: method
        value: POST
        rate_limit: {unit: hour, requests_per_unit: 1, name: posts, replaces: [{name: per-user}]}
        metadata: {route: posts}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 3, name: per-user}
    metadata: {route: user}
  - key: shadow
    rate_limit: {unit: second, requests_per_unit: 1}
    shadow_mode: true
    quota_mode: true
  - key: admin
    value: root
    rate_limit: {unlimited: true}
    metadata: {who: root}
`

func diffConfig(t *testing.T) *rlsconf.RateLimitConfig {
	md := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	limit := func(u rlsconf.RateLimitUnit, n uint32) *rlsconf.RateLimitPolicy {
		return &rlsconf.RateLimitPolicy{Unit: u, RequestsPerUnit: n}
	}
	posts := limit(rlsconf.RateLimitUnit_HOUR, 1)
	posts.Name, posts.Replaces = "posts", []*rlsconf.RateLimitReplace{{Name: "per-user"}}
	perUser := limit(rlsconf.RateLimitUnit_DAY, 3)
	perUser.Name = "per-user"
	return &rlsconf.RateLimitConfig{Name: "diff", Domain: "diff", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "quota_a", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 2), QuotaMode: true, Metadata: md(map[string]any{"bucket": "a", "weight": 1.5})},
		{Key: "quota_b", RateLimit: limit(rlsconf.RateLimitUnit_WEEK, 3), QuotaMode: true,
			Metadata: md(map[string]any{"bucket": "b", "tags": []any{"x", "yes"}, "nested": map[string]any{"n": 1, "none": nil}})},
		{Key: "regular", RateLimit: limit(rlsconf.RateLimitUnit_SECOND, 4), DetailedMetric: true,
			Metadata: md(map[string]any{"kind": "regular", "nested": map[string]any{"m": 2}})},
		{Key: "path", Value: "/api", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "method", Value: "POST", RateLimit: posts, Metadata: md(map[string]any{"route": "posts"})}}},
		{Key: "user", RateLimit: perUser, Metadata: md(map[string]any{"route": "user"})},
		{Key: "shadow", RateLimit: limit(rlsconf.RateLimitUnit_SECOND, 1), ShadowMode: true, QuotaMode: true},
		{Key: "admin", Value: "root", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}, Metadata: md(map[string]any{"who": "root"})},
	}}
}

// diffRequests are the requests both servers answer, in order: quota
// descriptors alone, together, with a regular one, nested and replaced
// limits, shadow and unlimited ones.
func diffRequests() []*pb.RateLimitRequest {
	d := func(kv ...string) *commonpb.RateLimitDescriptor {
		out := &commonpb.RateLimitDescriptor{}
		for i := 0; i < len(kv); i += 2 {
			out.Entries = append(out.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	req := func(ds ...*commonpb.RateLimitDescriptor) *pb.RateLimitRequest {
		return &pb.RateLimitRequest{Domain: "diff", HitsAddend: 1, Descriptors: ds}
	}
	return []*pb.RateLimitRequest{
		req(d("quota_a", "x")),
		req(d("quota_a", "x"), d("quota_b", "y")),
		req(d("regular", "r"), d("quota_a", "x")),
		req(d("regular", "r")),
		req(d("path", "/api", "method", "POST"), d("user", "u1")),
		req(d("user", "u1")),
		req(d("shadow", "s"), d("quota_b", "y")),
		req(d("admin", "root"), d("quota_a", "x")),
	}
}

// TestFileAndXDSAnswerAlike: the same rules, once read from a file and
// once pushed over xDS by a go-control-plane server, give the same
// answers to the same requests (codes, per-descriptor statuses, limits,
// remaining, headers, dynamic metadata) on the same clock, round after
// round until the limits are over. Before the descriptor's quota_mode and
// metadata were carried over xDS, the xDS side answered OVER_LIMIT where
// the file's quota rules answer OK, and returned no descriptor metadata.
func TestFileAndXDSAnswerAlike(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	server := func(set *rules.Set) *rls.Server {
		srv, err := rls.New(memstore.New(memstore.Options{Now: clock}), set, rls.Options{Now: clock, ResponseDynamicMetadata: true})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "diff.yaml"), []byte(diffYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := rules.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fromFile := server(set)

	cp := startControlPlane(t)
	fromXDS := server(nil)
	client := runClient(t, fromXDS, xds.Options{Server: cp.addr, NodeID: "diff"})
	cp.push(t, "diff", "1", diffConfig(t))
	waitFor(t, "version 1", func() bool { return client.Status().Version == "1" })

	okQuota := 0 // answers OK only because quota_mode says so
	for round := range 5 {
		for i, req := range diffRequests() {
			want, err := fromFile.ShouldRateLimit(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fromXDS.ShouldRateLimit(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("round %d, request %d (%s):\nxDS:  %s\nfile: %s", round, i, protojson.Format(req), protojson.Format(got), protojson.Format(want))
			}
			if want.GetOverallCode() == pb.RateLimitResponse_OK {
				for _, st := range want.GetStatuses() {
					if st.GetCode() == pb.RateLimitResponse_OVER_LIMIT {
						okQuota++
					}
				}
			}
		}
		mu.Lock()
		now = now.Add(300 * time.Millisecond)
		mu.Unlock()
	}
	if okQuota == 0 {
		t.Fatal("no request was OK with a quota descriptor over: the rules do not exercise quota_mode")
	}
}
