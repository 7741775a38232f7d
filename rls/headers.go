package rls

import (
	"strconv"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
)

func wrapU32(v uint32) *wrapperspb.UInt32Value { return wrapperspb.UInt32(v) }

// policyName names a descriptor's policy in the IETF headers: the rule's
// name, else its key.
func policyName(c *check, i int) string {
	switch {
	case c.Rule != nil && c.Rule.HasName():
		return c.Rule.Name
	case c.Rule != nil:
		return c.Rule.Key
	}
	return "descriptor-" + strconv.Itoa(i)
}

// responseHeaders are the rate limit headers of s.headers for the
// enforced descriptors of checks (header.Mode, written by package
// header as the gateway writes them).
func (s *Server) responseHeaders(checks []check, resp *pb.RateLimitResponse) []*corepb.HeaderValue {
	var buf [4]header.State
	ps := buf[:0]
	for i := range checks {
		c := &checks[i]
		if c.Kind != kindLimited || c.Shadow {
			continue
		}
		q, w := c.Quota()
		st := resp.Statuses[i]
		p := header.State{Name: policyName(c, i), Quota: q, Window: ratelimit.DurationCeil(w),
			Remaining: int64(st.LimitRemaining), Reset: st.DurationUntilReset.GetSeconds(),
			Over: st.Code == pb.RateLimitResponse_OVER_LIMIT}
		if (s.quota || (c.Rule != nil && c.Rule.QuotaMode)) && resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			// A quota_mode descriptor over its limit, while another quota
			// descriptor still has room: the request is admitted.
			p.Over = false
		}
		if p.Over {
			wait := c.d.RetryAfter
			if c.Request.Algorithm == ratelimit.FixedWindow || wait == 0 {
				wait = st.DurationUntilReset.AsDuration()
			}
			p.RetryAfter = ratelimit.DurationCeil(wait)
		}
		ps = append(ps, p)
	}
	var out []*corepb.HeaderValue
	header.WriteNamed(s.headers, s.names, ps, func(name, value string) {
		out = append(out, headerValue(name, value))
	})
	return out
}
