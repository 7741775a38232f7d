package httplimit

import (
	"net/http"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
)

// setHeaders writes the headers of mode for the enforced rules of as;
// denied is the index of the rule that denied (-1: none). pc caches the
// RateLimit-Policy value, which depends on the rules, not the request.
// Retry-After is the refusal's (Refusals.Write), not written here.
func setHeaders(h http.Header, mode header.Mode, pc *policyCache, as []applied, denied int) {
	if mode == header.Off {
		return
	}
	var buf [4]header.State
	ps := buf[:0]
	for i := range as {
		a := &as[i]
		if a.Shadow || a.failed {
			continue
		}
		q, w := a.Quota()
		ps = append(ps, header.State{Name: a.policy, Quota: q, Window: ratelimit.DurationCeil(w),
			Remaining: a.d.Remaining, Reset: ratelimit.DurationCeil(a.d.ResetAfter),
			Over: i == denied, RetryAfter: ratelimit.DurationCeil(a.d.RetryAfter)})
	}
	if len(ps) == 0 {
		return
	}
	if mode == header.IETF && pc != nil {
		setIETF(h, pc.value(ps), ps)
		return
	}
	// One array holds every header's value: one allocation for all.
	vals := make([]string, 0, 3)
	header.Write(mode, ps, func(name, value string) {
		if name == header.RetryAfter {
			return
		}
		vals = append(vals, value)
		n := len(vals)
		h[canonical(name)] = vals[n-1 : n : n]
	})
}

// ietfValues is the one allocation of setIETF: the header values'
// slices and the RateLimit value's bytes (96 bytes, a size class).
type ietfValues struct {
	v [2]string // RateLimit-Policy, RateLimit
	b [64]byte
}

// setIETF sets RateLimit-Policy to policy (the cached value of ps) and
// RateLimit. An admitted request whose RateLimit value fits ietfValues.b
// costs one allocation.
func setIETF(h http.Header, policy string, ps []header.State) {
	iv := new(ietfValues)
	b := header.AppendRateLimit(iv.b[:0], ps)
	if &b[0] == &iv.b[0] {
		// The bytes are iv's and never written again: the string
		// shares iv's allocation.
		iv.v[1] = unsafe.String(&iv.b[0], len(b))
	} else {
		iv.v[1] = string(b) // grew past iv.b
	}
	iv.v[0] = policy
	h["Ratelimit-Policy"] = iv.v[0:1:1]
	h["Ratelimit"] = iv.v[1:2:2]
}

// policyCache holds the last RateLimit-Policy value a handler wrote and
// the policies it is for; a request with the same policies (names, quotas,
// windows) reuses it without building or allocating it.
type policyCache struct {
	p atomic.Pointer[cachedPolicy]
}

type cachedPolicy struct {
	ps  []header.State // Name, Quota and Window are set
	val string
}

func (c *policyCache) value(ps []header.State) string {
	if e := c.p.Load(); e != nil && samePolicies(e.ps, ps) {
		return e.val
	}
	var buf [128]byte
	e := &cachedPolicy{ps: make([]header.State, len(ps)), val: string(header.AppendPolicy(buf[:0], ps))}
	for i := range ps {
		e.ps[i] = header.State{Name: ps[i].Name, Quota: ps[i].Quota, Window: ps[i].Window}
	}
	c.p.Store(e)
	return e.val
}

func samePolicies(a, b []header.State) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Quota != b[i].Quota || a[i].Window != b[i].Window || a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// canonical is name in net/http's canonical form, without allocating.
func canonical(name string) string {
	switch name {
	case header.Policy:
		return "Ratelimit-Policy"
	case header.RateLimit:
		return "Ratelimit"
	case header.Limit:
		return "X-Ratelimit-Limit"
	case header.Remaining:
		return "X-Ratelimit-Remaining"
	case header.Reset:
		return "X-Ratelimit-Reset"
	}
	return http.CanonicalHeaderKey(name)
}
