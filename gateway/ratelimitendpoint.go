package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
)

// rateLimitEndpointLimit is how often one identity may call
// rate_limit_endpoint: reading limits costs a store read per rule, so the
// endpoint is limited too, per identity, in the gateway's memory.
var rateLimitEndpointLimit = ratelimit.Limit{Rate: 60, Period: time.Minute, Burst: 20}

// rateLimitEndpoint is rate_limit_endpoint (GitHub's GET /rate_limit):
// the caller's state on every rule that applies to it, read without
// charging anything. The caller is resolved as for a limited request, and
// the rules are those every route's rate_limits make for this request,
// each key once, with the admin API's overrides and enforcement applied.
//
//	{"identity": "ip:203.0.113.7",
//	 "resources": {"per-ip": {"limit": 5, "remaining": 4, "used": 1, "reset": 1764072000,
//	                          "window": 60, "policy": "per-ip", "algorithm": "token_bucket"}},
//	 "rate": {...the enforced resource with the fewest remaining...}}
//
// limit and window are the RateLimit-Policy's q and w; remaining is what
// the RateLimit header's r would say before the next request is charged;
// reset is the Unix time (seconds) when the quota is full again. A gateway
// whose headers are opaque does not tell quotas: the endpoint answers 404.
type rateLimitEndpoint struct {
	o        *ops
	cfg      *Config
	resolver cachedIdentity
}

// resource is one rule, in GitHub's shape plus the IETF policy.
type resource struct {
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	Used      int64  `json:"used"`
	Reset     int64  `json:"reset"`
	Window    int64  `json:"window"`
	Policy    string `json:"policy"`
	Algorithm string `json:"algorithm"`
	Shadow    bool   `json:"shadow,omitempty"` // counted, never denied
}

func (h *rateLimitEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Headers == header.Off {
		problem(w, http.StatusNotFound, "this gateway does not disclose rate limits")
		return
	}
	id, err := h.resolver.Resolve(r)
	if err != nil {
		if errors.Is(err, identity.ErrUnauthorized) {
			h.o.g.refuse(w, r, err)
			return
		}
		problem(w, http.StatusInternalServerError, "cannot identify the caller")
		return
	}
	ctx := r.Context()
	who := id.Key()
	own, err := h.o.ownLimit.Apply(ctx, ratelimit.Request{Key: who, Limit: rateLimitEndpointLimit, N: 1})
	if err == nil && !own.Allowed {
		// The endpoint's own limit, not a layer of the routes: written as
		// every refusal is, observed by none.
		(*httplimit.Refusals)(nil).Write(w, header.IETF, httplimit.Refusal{Layer: httplimit.LayerRateLimit,
			Status: http.StatusTooManyRequests, Key: who, RetryAfter: max(time.Second, own.RetryAfter),
			Detail: "too many calls to " + h.cfg.RateLimitEndpoint})
		return
	}
	checks, err := h.o.checksFor(h.cfg, r, id)
	checks = h.o.door.Limited(checks)
	if err != nil {
		problem(w, http.StatusInternalServerError, "cannot resolve the rate limits")
		return
	}
	now := time.Now()
	out := struct {
		Identity  string              `json:"identity"`
		Resources map[string]resource `json:"resources"`
		Rate      *resource           `json:"rate,omitempty"`
	}{Identity: who, Resources: map[string]resource{}}
	for i := range checks {
		c := &checks[i]
		name := c.Policy()
		if _, dup := out.Resources[name]; dup {
			continue
		}
		d, err := h.o.door.PeekCheck(ctx, c)
		if err != nil {
			problem(w, http.StatusServiceUnavailable, "the rate limit store is unavailable")
			return
		}
		q, win := c.Quota()
		res := resource{Limit: q, Remaining: d.Remaining, Used: max(0, q-d.Remaining),
			Reset: now.Add(d.ResetAfter).Add(time.Second - 1).Unix(), Window: int64(win / time.Second),
			Policy: name, Algorithm: c.Request.Algorithm.String(), Shadow: !c.Enforced()}
		if c.Rule != nil && c.Rule.Quota != nil {
			res.Algorithm = "quota"
		}
		out.Resources[name] = res
		if c.Enforced() && (out.Rate == nil || res.Remaining < out.Rate.Remaining) {
			cp := res
			out.Rate = &cp
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}
