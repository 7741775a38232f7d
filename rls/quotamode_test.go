package rls_test

import (
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

const quotaConfig = `
domain: test
descriptors:
  - key: qa
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: qb
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: qs
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: reg
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// TestQuotaModeResults replays envoyproxy/ratelimit's quota_mode results
// since its #1059 (src/service/ratelimit.go): a quota_mode descriptor over
// its limit says OVER_LIMIT in its own status; the answer is OVER_LIMIT when
// any regular descriptor is over, or when the request has quota_mode
// descriptors and all of them are over. A shadow_mode quota descriptor says
// OK and is never one of those over; unlimited and unmatched descriptors are
// neither regular nor quota.
func TestGlobalQuotaMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		exhaust []string
		descs   []string
		overall pb.RateLimitResponse_Code
	}{
		{"a regular rule over alone", []string{"reg"}, []string{"reg"}, over},
		{"a regular rule over beside one within", []string{"reg"}, []string{"reg", "qa"}, ok},
		{"all over", []string{"reg", "qa"}, []string{"reg", "qa"}, over},
		{"over beside an unmatched descriptor", []string{"reg"}, []string{"reg", "nope"}, ok},
		{"over beside an unlimited one", []string{"reg"}, []string{"reg", "free"}, over},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{clock: &clock{t: t0}, dir: t.TempDir()}
			writeConfig(t, h.dir, "test.yaml", quotaConfig)
			set, err := rules.LoadDir(h.dir)
			if err != nil {
				t.Fatal(err)
			}
			h.start(t, memoryStore, set, rls.Options{QuotaMode: true})
			for _, k := range tc.exhaust {
				h.call(t, 0, d(k, "v"))
			}
			var descs []*commonpb.RateLimitDescriptor
			for _, k := range tc.descs {
				descs = append(descs, d(k, "v"))
			}
			resp := h.call(t, 0, descs...)
			if resp.OverallCode != tc.overall {
				t.Errorf("overall_code = %v, want %v", resp.OverallCode, tc.overall)
			}
			if resp.Statuses[0].Code != over {
				t.Errorf("statuses[0] = %v, want OVER_LIMIT", resp.Statuses[0].Code)
			}
		})
	}
}

func TestQuotaModeResults(t *testing.T) {
	t.Parallel()
	// exhaust marks which keys are used up before the request.
	type tc struct {
		name    string
		exhaust []string
		descs   []string // keys, each with value "v"
		overall pb.RateLimitResponse_Code
		codes   []pb.RateLimitResponse_Code
	}
	for _, c := range []tc{
		{"one quota, under", nil, []string{"qa"}, ok, []pb.RateLimitResponse_Code{ok}},
		{"one quota, over", []string{"qa"}, []string{"qa"}, over, []pb.RateLimitResponse_Code{over}},
		{"all quotas over", []string{"qa", "qb"}, []string{"qa", "qb"}, over, []pb.RateLimitResponse_Code{over, over}},
		{"some quotas over", []string{"qa"}, []string{"qa", "qb"}, ok, []pb.RateLimitResponse_Code{over, ok}},
		{"regular under, all quotas over", []string{"qa"}, []string{"reg", "qa"}, over, []pb.RateLimitResponse_Code{ok, over}},
		{"regular under, some quotas over", []string{"qb"}, []string{"reg", "qa", "qb"}, ok, []pb.RateLimitResponse_Code{ok, ok, over}},
		{"regular over, quotas under", []string{"reg"}, []string{"reg", "qa", "qb"}, over, []pb.RateLimitResponse_Code{over, ok, ok}},
		{"regular over, some quotas over", []string{"reg", "qa"}, []string{"reg", "qa", "qb"}, over, []pb.RateLimitResponse_Code{over, over, ok}},
		{"shadow quota over alone", []string{"qs"}, []string{"qs"}, ok, []pb.RateLimitResponse_Code{ok}},
		{"shadow quota over, other quota over", []string{"qs", "qa"}, []string{"qs", "qa"}, ok, []pb.RateLimitResponse_Code{ok, over}},
		{"quota over, unlimited and unmatched", []string{"qa"}, []string{"qa", "free", "nope"}, over, []pb.RateLimitResponse_Code{over, ok, ok}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{clock: &clock{t: t0}, dir: t.TempDir()}
			writeConfig(t, h.dir, "test.yaml", quotaConfig)
			set, err := rules.LoadDir(h.dir)
			if err != nil {
				t.Fatal(err)
			}
			h.start(t, memoryStore, set, rls.Options{Headers: header.Legacy})
			for _, k := range c.exhaust {
				h.call(t, 0, d(k, "v"))
			}
			var descs []*commonpb.RateLimitDescriptor
			for _, k := range c.descs {
				descs = append(descs, d(k, "v"))
			}
			resp := h.call(t, 0, descs...)
			if resp.OverallCode != c.overall {
				t.Errorf("overall_code = %v, want %v", resp.OverallCode, c.overall)
			}
			for i, want := range c.codes {
				s := resp.Statuses[i]
				if s.Code != want {
					t.Errorf("statuses[%d] (%s) = %v, want %v", i, c.descs[i], s.Code, want)
				}
				if s.Code == over && (s.DurationUntilReset.GetSeconds() != 30 || s.CurrentLimit.GetRequestsPerUnit() != 1) {
					t.Errorf("statuses[%d] = %v, want the limit and a reset of 30 s", i, s)
				}
			}
			retry := ""
			for _, hv := range resp.ResponseHeadersToAdd {
				if hv.Key == "Retry-After" {
					retry = hv.Value
				}
			}
			if (retry != "") != (c.overall == over) {
				t.Errorf("Retry-After = %q with overall %v", retry, c.overall)
			}
		})
	}
}
