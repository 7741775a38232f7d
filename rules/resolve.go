package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// This file is where a descriptor becomes a store request. Both front
// doors (the gateway's httplimit middleware and the RLS) call Resolve and
// keep only what is their own: how they read their input, how they charge
// the store and how they answer.

// Kind says what a descriptor resolved to.
type Kind uint8

const (
	// NoLimit: no rule applies (no match, an unknown domain, a disabled
	// rule, or a rule another one replaces). Nothing is counted.
	NoLimit Kind = iota
	// Unlimited: an unlimited rule matched. Nothing is counted; the RLS
	// reports the descriptor's remaining as unlimited.
	Unlimited
	// Limited: Check.Request is to be applied to the store.
	Limited
)

var kindNames = [...]string{"none", "unlimited", "limited"}

// String returns none, unlimited or limited.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Descriptor is one descriptor of a request, as a front door read it.
type Descriptor struct {
	// Entries are the descriptor's key/value pairs, in order.
	Entries []Entry
	// Hits is what the descriptor costs: the N of its store request. 0
	// checks without counting (the RLS's hits_addend: 0).
	Hits int64
	// Override, when not nil, is a limit the caller sent with the
	// descriptor (Envoy's RateLimitDescriptor.limit): a fixed window that
	// applies instead of any matching rule, in a known domain only.
	Override *ratelimit.Limit
}

// Input is one request's descriptors in one domain.
type Input struct {
	Domain      string
	Descriptors []Descriptor
	// Now is read once, and only when a calendar quota matched. Nil means
	// time.Now.
	Now func() time.Time
	// Shadow puts every rule in shadow mode (the gateway's shadow: true).
	// The RLS's global SHADOW_MODE is not this: it answers OK but reports
	// each descriptor's status, which is the RLS's own business.
	Shadow bool
	// Disabled names rules (Rule.Name) that do not apply: a disabled rule
	// is as if it had not matched, and replaces nothing.
	Disabled map[string]bool
}

// Check is what one descriptor resolved to.
type Check struct {
	Kind Kind
	// Rule is the rule the descriptor matched; nil for an override and
	// when nothing matched or the rule was replaced.
	Rule *Rule
	// Request is the store request of a Limited check: its Key (see
	// AppendKey), Limit, Algorithm and N (the descriptor's Hits). A
	// calendar quota is a FixedWindow whose one window covers the whole
	// period (QuotaLimit).
	Request ratelimit.Request
	// Shadow checks are counted and reported but never deny: the rule's
	// shadow_mode, or Input.Shadow.
	Shadow bool
	// QuotaEnd is, for a calendar quota, the end of the current period:
	// the quota resets then, whatever the store's window says.
	QuotaEnd time.Time

	b *binding // the rule's, when the Set is bound (Set.Bind); see Decide
}

// Enforced reports whether the check can deny the request: it is Limited
// and neither in shadow mode nor in quota_mode (which reports an exceeded
// limit instead of denying).
func (c *Check) Enforced() bool {
	return c.Kind == Limited && !c.Shadow && (c.Rule == nil || !c.Rule.QuotaMode)
}

// Policy is the name a check is reported under in headers, problem
// bodies and metrics: the rule's Name, or "override" for a limit the
// caller sent.
func (c *Check) Policy() string {
	if c.Rule == nil {
		return "override"
	}
	return c.Rule.Name
}

// Resolve appends to dst one Check per descriptor of in, in order, and
// returns it. This is the whole of what a rule file means for a request:
//
//   - Each descriptor matches at most one rule of in.Domain (Config.Match).
//     An unknown domain limits nothing, overrides included, as in
//     envoyproxy/ratelimit.
//   - A descriptor with an Override is limited by it (a fixed window, no
//     rule), in a known domain.
//   - replaces: every matched rule, unlimited ones included, names the
//     rules it replaces; a limited check whose rule has an explicit name
//     (rate_limit.name) among them resolves to NoLimit. This is
//     envoyproxy/ratelimit's constructLimitsToCheck: two rules that replace
//     each other both go.
//   - An unlimited rule resolves to Unlimited; a quota rule to a fixed
//     window covering its calendar period, with QuotaEnd; any other rule
//     to its Limit and Algorithm.
//   - shadow_mode (or Input.Shadow) sets Shadow; quota_mode is the rule's
//     (Check.Enforced).
//
// The error is only for a calendar period that no store window can cover
// (a clock before 1970); the checks resolved so far are returned with it.
// Resolve allocates one string per Limited check, its key.
func (s *Set) Resolve(dst []Check, in Input) ([]Check, error) {
	cfg := s.Config(in.Domain)
	base := len(dst)
	anyReplaces := false
	var now time.Time
	var buf [160]byte
	for i := range in.Descriptors {
		d := &in.Descriptors[i]
		dst = append(dst, Check{})
		c := &dst[len(dst)-1]
		if cfg == nil {
			continue
		}
		if d.Override != nil {
			c.Kind = Limited
			c.Shadow = in.Shadow
			c.Request = ratelimit.Request{Limit: *d.Override, Algorithm: ratelimit.FixedWindow, N: d.Hits}
			c.Request.Key = string(appendKey(buf[:0], ratelimit.FixedWindow, d.Override.Period, time.Time{}, "", nil, in.Domain, d.Entries))
			continue
		}
		r := cfg.Match(d.Entries)
		if r == nil || in.Disabled[r.Name] {
			continue
		}
		c.Rule = r
		if r.seq < len(cfg.binds) {
			c.b = &cfg.binds[r.seq]
		}
		anyReplaces = anyReplaces || len(r.Replaces) > 0
		if r.Unlimited {
			c.Kind = Unlimited
			continue
		}
		c.Kind = Limited
		c.Shadow = r.ShadowMode || in.Shadow
		c.Request = ratelimit.Request{Limit: r.Limit, Algorithm: r.Algorithm, N: d.Hits}
		if r.Quota != nil {
			if now.IsZero() {
				if in.Now != nil {
					now = in.Now()
				} else {
					now = time.Now()
				}
			}
			start, end := r.Quota.Window(now)
			lim, err := QuotaLimit(start, end, r.Quota.Limit)
			if err != nil {
				*c = Check{}
				return dst, fmt.Errorf("rules: %s: %w", r.Key, err)
			}
			c.Request.Limit, c.Request.Algorithm, c.QuotaEnd = lim, ratelimit.FixedWindow, end
			c.Request.Key = string(appendKey(buf[:0], ratelimit.FixedWindow, 0, start, r.Quota.Period, r, in.Domain, d.Entries))
			continue
		}
		c.Request.Key = string(appendKey(buf[:0], r.Algorithm, r.Limit.Period, time.Time{}, "", r, in.Domain, d.Entries))
	}
	if anyReplaces {
		replace(dst[base:])
	}
	return dst, nil
}

// replace drops the limited checks that another matched rule replaces.
// Every matched rule's replaces count, those of rules that are themselves
// replaced included: the names are collected before anything is dropped.
func replace(cs []Check) {
	var buf [8]string
	names := buf[:0]
	for i := range cs {
		if r := cs[i].Rule; r != nil {
			names = append(names, r.Replaces...)
		}
	}
	for i := range cs {
		c := &cs[i]
		if c.Kind == Limited && c.Rule != nil && c.Rule.HasName() && slices.Contains(names, c.Rule.Name) {
			*c = Check{}
		}
	}
}

// AppendKey appends to dst the store key of the state that entries
// limited by r share (see Resolve for quotas, which use their own form):
//
//	sl:<algorithm>:<period in ms>ms:<domain>_<key1>_<value1>_<key2>_<value2>_
//
// e.g. "sl:fixed_window:60000ms:api_user_alice_". The algorithm is its text
// form (ratelimit.Algorithm.String) and the period the limit's, so a reload
// that changes either starts from a fresh state instead of reading one
// algorithm's state as another's. Calendar quotas are keyed by the start of
// their period, so each period starts from zero:
//
//	sl:quota:2026-11:<...>      (monthly)
//	sl:quota:2026-11-25:<...>   (daily)
//
// Domain, keys and values are written with '%' and '_' percent-encoded, so
// the key is injective: no value can spell another descriptor's key
// ("a=x_b_y" is not "a=x, b=y"). A value matched by a wildcard with
// share_threshold is replaced by the pattern, so all such values share one
// state. Both doors use this key, so a gateway fleet and an RLS fleet on
// one Redis share their counters. It does not allocate when dst has room.
func (r *Rule) AppendKey(dst []byte, entries []Entry) []byte {
	return appendKey(dst, r.Algorithm, r.Limit.Period, time.Time{}, "", r, r.Domain, entries)
}

// RefundKey returns the key under which the refunds given back to key (a
// key of AppendKey) are counted (httplimit.Middleware.RefundBudget):
// "sl:refund:" and key. No rule's key starts so (theirs start with
// "sl:<algorithm>:" or "sl:quota:"), so a refund count never shares a
// rule's state.
func RefundKey(key string) string { return "sl:refund:" + key }

func appendKey(dst []byte, alg ratelimit.Algorithm, period time.Duration, quotaStart time.Time, quotaPeriod string, r *Rule, domain string, entries []Entry) []byte {
	if quotaPeriod == "" && r != nil && r.keyPrefix != "" && r.Algorithm == alg && r.Limit.Period == period {
		dst = append(dst, r.keyPrefix...) // computed once, when the rule was parsed
	} else if quotaPeriod == "" {
		dst = appendKeyPrefix(dst, alg, period, domain)
	} else {
		dst = append(dst, "sl:quota:"...)
		if quotaPeriod == QuotaMonth {
			dst = quotaStart.UTC().AppendFormat(dst, "2006-01")
		} else {
			dst = quotaStart.UTC().AppendFormat(dst, "2006-01-02")
		}
		dst = append(dst, ':')
		dst = appendEscaped(dst, domain)
		dst = append(dst, '_')
	}
	return appendEntries(dst, r, entries)
}

// appendKeyPrefix appends the key of a rate limit up to its entries:
// "sl:<algorithm>:<ms>ms:<domain>_".
func appendKeyPrefix(dst []byte, alg ratelimit.Algorithm, period time.Duration, domain string) []byte {
	dst = append(dst, "sl:"...)
	dst = append(dst, alg.String()...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, period.Milliseconds(), 10)
	dst = append(dst, "ms:"...)
	dst = appendEscaped(dst, domain)
	return append(dst, '_')
}

// appendEntries appends "<key>_<value>_" for each entry, escaped; a value
// matched by a share_threshold wildcard is the pattern.
func appendEntries(dst []byte, r *Rule, entries []Entry) []byte {
	for i, e := range entries {
		dst = appendEscaped(dst, e.Key)
		dst = append(dst, '_')
		if r != nil && i < len(r.path) && r.path[i].shareThresh && r.path[i].wildcard {
			v := r.path[i].value
			if v == "" {
				v = r.path[i].local // a '*' in the key of a key-only descriptor
			}
			dst = appendEscaped(dst, v)
		} else {
			dst = appendEscaped(dst, e.Value)
		}
		dst = append(dst, '_')
	}
	return dst
}

// appendEscaped appends s with '%' and '_' percent-encoded.
func appendEscaped(dst []byte, s string) []byte {
	if strings.IndexByte(s, '_') < 0 && strings.IndexByte(s, '%') < 0 {
		return append(dst, s...) // the common case: nothing to escape
	}
	const hex = "0123456789ABCDEF"
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c == '_' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '%', hex[c>>4], hex[c&15])
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}

// Quota is what a Limited check admits, as the IETF RateLimit-Policy
// states it: q events per window w. A bucket holds Burst events and
// refills completely in Burst·Interval; a window holds Rate events per
// Period; a calendar quota holds its limit per calendar period (w is the
// current period's length: 28 to 31 days for a month).
func (c *Check) Quota() (q int64, w time.Duration) {
	if c.Rule != nil && c.Rule.Quota != nil && !c.QuotaEnd.IsZero() {
		start := c.QuotaEnd.AddDate(0, 0, -1)
		if c.Rule.Quota.Period == QuotaMonth {
			start = c.QuotaEnd.AddDate(0, -1, 0)
		}
		return c.Rule.Quota.Limit, c.QuotaEnd.Sub(start)
	}
	return c.Request.Limit.Normalize().Policy(c.Request.Algorithm)
}
