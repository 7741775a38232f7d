package rls

import (
	"strconv"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/sfv"
	"github.com/sluicehq/sluice/ratelimit"
)

func wrapU32(v uint32) *wrapperspb.UInt32Value { return wrapperspb.UInt32(v) }

// policyName names a descriptor's policy in the IETF headers: the rule's
// name, else its key.
func policyName(c *check, i int) string {
	switch {
	case c.rule != nil && c.rule.HasName():
		return c.rule.Name
	case c.rule != nil:
		return c.rule.Key
	}
	return "descriptor-" + strconv.Itoa(i)
}

// quotaOf returns the q and w (seconds) of a descriptor's policy: a window
// holds Rate events per Period, a bucket Burst events refilled in
// Burst·Interval.
func quotaOf(c *check) (q, w int64) {
	q, window := c.limit.Policy(c.alg)
	return q, ratelimit.DurationCeil(window)
}

func (s *Server) responseHeaders(checks []check, resp *pb.RateLimitResponse) []*corepb.HeaderValue {
	switch s.headers {
	case HeadersIETF:
		var pol, rl []byte
		var retry int64
		for i := range checks {
			c := &checks[i]
			if c.kind != kindLimited || c.shadow {
				continue
			}
			q, w := quotaOf(c)
			if len(pol) > 0 {
				pol = append(pol, ", "...)
				rl = append(rl, ", "...)
			}
			name := policyName(c, i)
			pol = sfv.AppendString(pol, name)
			pol = append(pol, ";q="...)
			pol = strconv.AppendInt(pol, q, 10)
			pol = append(pol, ";w="...)
			pol = strconv.AppendInt(pol, w, 10)
			rl = sfv.AppendString(rl, name)
			rl = append(rl, ";r="...)
			rl = strconv.AppendUint(rl, uint64(resp.Statuses[i].LimitRemaining), 10)
			rl = append(rl, ";t="...)
			rl = strconv.AppendInt(rl, resp.Statuses[i].DurationUntilReset.GetSeconds(), 10)
			if c.over {
				wait := c.d.RetryAfter
				if c.alg == ratelimit.FixedWindow || wait == 0 {
					wait = resp.Statuses[i].DurationUntilReset.AsDuration()
				}
				retry = max(retry, ratelimit.DurationCeil(wait))
			}
		}
		if len(pol) == 0 {
			return nil
		}
		out := []*corepb.HeaderValue{header("RateLimit-Policy", string(pol)), header("RateLimit", string(rl))}
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT && retry > 0 {
			out = append(out, header("Retry-After", strconv.FormatInt(retry, 10)))
		}
		return out
	case HeadersLegacy:
		// envoyproxy/ratelimit's choice: the lowest limit_remaining, and an
		// over-limit descriptor (the last one) wins outright.
		best, over := -1, false
		for i, st := range resp.Statuses {
			if st.CurrentLimit == nil || checks[i].kind != kindLimited {
				continue
			}
			if st.Code == pb.RateLimitResponse_OVER_LIMIT {
				best, over = i, true
				continue
			}
			if !over && (best < 0 || st.LimitRemaining < resp.Statuses[best].LimitRemaining) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		st := resp.Statuses[best]
		return []*corepb.HeaderValue{
			header("X-RateLimit-Limit", strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10)),
			header("X-RateLimit-Remaining", strconv.FormatUint(uint64(st.LimitRemaining), 10)),
			header("X-RateLimit-Reset", strconv.FormatInt(st.DurationUntilReset.GetSeconds(), 10)),
		}
	}
	return nil
}
