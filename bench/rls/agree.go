package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Stream returns n requests for config/bench.yaml's domain, drawn from a
// random source seeded with seed: one to three descriptors each, over
// every rule kind of the config (plain, unlimited, nested with a wildcard,
// replaces, shadow mode, quota mode, detailed metric, a zero limit, an
// unknown key and
// limit overrides), with request and descriptor hits_addend (including
// explicit zeros and costs above what is left). Values carry run, so
// every run starts from fresh counters.
func Stream(seed uint64, n int, run string) []*pb.RateLimitRequest {
	rng := rand.New(rand.NewPCG(seed, 7))
	entry := func(k, v string) *commonpb.RateLimitDescriptor_Entry {
		return &commonpb.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	descriptor := func() *commonpb.RateLimitDescriptor {
		d := &commonpb.RateLimitDescriptor{}
		switch rng.IntN(10) {
		case 0, 1:
			d.Entries = append(d.Entries, entry("user", "u"+strconv.Itoa(rng.IntN(6))+"-"+run))
		case 2:
			d.Entries = append(d.Entries, entry("user", "vip"))
		case 3:
			path := "/search/" + strconv.Itoa(rng.IntN(3))
			if rng.IntN(3) == 0 {
				path = "/other"
			}
			d.Entries = append(d.Entries, entry("api_key", "k"+strconv.Itoa(rng.IntN(3))+"-"+run), entry("path", path))
		case 4, 5:
			d.Entries = append(d.Entries, entry("remote_address", "10.0.0."+strconv.Itoa(rng.IntN(4))+"-"+run))
		case 6:
			d.Entries = append(d.Entries, entry("generic_key", "shadowed"))
		case 7:
			d.Entries = append(d.Entries, entry("generic_key", "detailed"))
		case 8:
			switch rng.IntN(3) {
			case 0:
				d.Entries = append(d.Entries, entry("generic_key", "blocked"))
			case 1:
				d.Entries = append(d.Entries, entry("generic_key", "quota"))
			default:
				d.Entries = append(d.Entries, entry("unknown", "x"))
			}
		case 9:
			d.Entries = append(d.Entries, entry("user", "o"+strconv.Itoa(rng.IntN(3))+"-"+run))
			d.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typepb.RateLimitUnit_MINUTE}
		}
		switch rng.IntN(12) {
		case 0:
			d.HitsAddend = wrapperspb.UInt64(0)
		case 1:
			d.HitsAddend = wrapperspb.UInt64(uint64(3 + rng.IntN(20)))
		}
		return d
	}
	hits := []uint32{0, 0, 0, 1, 1, 2, 3}
	reqs := make([]*pb.RateLimitRequest, n)
	for i := range reqs {
		r := &pb.RateLimitRequest{Domain: "bench", HitsAddend: hits[rng.IntN(len(hits))]}
		for range 1 + rng.IntN(3) {
			r.Descriptors = append(r.Descriptors, descriptor())
		}
		reqs[i] = r
	}
	return reqs
}

// Agreement counts the answers of two servers to one stream.
type Agreement struct {
	Requests      int
	Descriptors   int
	OverLimit     int    // descriptors over the limit (per the first server)
	Disagree      int    // requests whose answers differ (code, remaining or limit)
	ResetOffByOne int    // descriptors whose duration_until_reset differs by one second (clocks read apart)
	First         string // the first disagreement, for the report
}

// Agree sends every request of reqs to a, then to b, and compares the
// answers: overall code, and per descriptor the code, limit_remaining and
// current_limit (requests per unit, unit, name); duration_until_reset must
// agree to the second (one second apart counts separately: the two
// servers read their clocks at different instants).
//
// a is envoyproxy/ratelimit at EnvoyVersion (January 2026, the newest the
// module proxy serves), which predates upstream's #1059 (March 2026:
// "Fix quota result when all limits were exceeded"); sluice follows
// #1059. So a's answers are first brought to #1059's semantics by
// Upgrade1059, the change as upstream's diff makes it, and only then
// compared.
func Agree(ctx context.Context, a, b pb.RateLimitServiceClient, reqs []*pb.RateLimitRequest) (Agreement, error) {
	var ag Agreement
	for i, req := range reqs {
		ra, err := a.ShouldRateLimit(ctx, req)
		if err != nil {
			return ag, fmt.Errorf("request %d: first server: %w", i, err)
		}
		rb, err := b.ShouldRateLimit(ctx, req)
		if err != nil {
			return ag, fmt.Errorf("request %d: second server: %w", i, err)
		}
		Upgrade1059(req, ra, rb)
		ag.Requests++
		diff := ""
		if ra.OverallCode != rb.OverallCode {
			diff = fmt.Sprintf("overall_code %v vs %v", ra.OverallCode, rb.OverallCode)
		}
		if len(ra.Statuses) != len(rb.Statuses) {
			diff = fmt.Sprintf("%d statuses vs %d", len(ra.Statuses), len(rb.Statuses))
		} else {
			for j := range ra.Statuses {
				sa, sb := ra.Statuses[j], rb.Statuses[j]
				ag.Descriptors++
				if sa.Code == pb.RateLimitResponse_OVER_LIMIT {
					ag.OverLimit++
				}
				switch {
				case sa.Code != sb.Code, sa.LimitRemaining != sb.LimitRemaining,
					sa.CurrentLimit.GetRequestsPerUnit() != sb.CurrentLimit.GetRequestsPerUnit(),
					sa.CurrentLimit.GetUnit() != sb.CurrentLimit.GetUnit(),
					sa.CurrentLimit.GetName() != sb.CurrentLimit.GetName(),
					(sa.DurationUntilReset == nil) != (sb.DurationUntilReset == nil):
					if diff == "" {
						diff = fmt.Sprintf("status %d: %v vs %v", j, sa, sb)
					}
				}
				if da, db := sa.DurationUntilReset.GetSeconds(), sb.DurationUntilReset.GetSeconds(); da != db {
					if da-db == 1 || db-da == 1 {
						ag.ResetOffByOne++
					} else if diff == "" {
						diff = fmt.Sprintf("status %d: duration_until_reset %ds vs %ds", j, da, db)
					}
				}
			}
		}
		if diff != "" {
			ag.Disagree++
			if ag.First == "" {
				ag.First = fmt.Sprintf("request %d %v: %s\n    first:  %v\n    second: %v", i, req, diff, ra, rb)
			}
		}
	}
	return ag, nil
}

// isQuota reports whether d is the stream's quota_mode descriptor
// (generic_key=quota in config/bench.yaml).
func isQuota(d *commonpb.RateLimitDescriptor) bool {
	es := d.GetEntries()
	return len(es) == 1 && es[0].GetKey() == "generic_key" && es[0].GetValue() == "quota"
}

// Upgrade1059 rewrites old, an answer of envoyproxy/ratelimit before its
// #1059, as that server answers since: a quota_mode descriptor over its
// limit (before: OK, its limit, no duration_until_reset) is OVER_LIMIT,
// and the overall code is OVER_LIMIT when a regular descriptor is over or
// every quota_mode descriptor is. The duration_until_reset #1059 adds to
// such a status is not in old; it is taken from now, sluice's answer, and
// so not compared.
func Upgrade1059(req *pb.RateLimitRequest, old, now *pb.RateLimitResponse) {
	quotas, quotasOver, regularOver := 0, 0, false
	for i, st := range old.GetStatuses() {
		if i >= len(req.GetDescriptors()) {
			return
		}
		if !isQuota(req.Descriptors[i]) || st.GetCurrentLimit() == nil {
			regularOver = regularOver || st.GetCode() == pb.RateLimitResponse_OVER_LIMIT
			continue
		}
		quotas++
		if st.GetCode() == pb.RateLimitResponse_OK && st.GetDurationUntilReset() == nil {
			st.Code = pb.RateLimitResponse_OVER_LIMIT
			if i < len(now.GetStatuses()) {
				st.DurationUntilReset = now.Statuses[i].GetDurationUntilReset()
			}
		}
		if st.GetCode() == pb.RateLimitResponse_OVER_LIMIT {
			quotasOver++
		}
	}
	if regularOver || (quotas > 0 && quotasOver == quotas) {
		old.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	} else {
		old.OverallCode = pb.RateLimitResponse_OK
	}
}
