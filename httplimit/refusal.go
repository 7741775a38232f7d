package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rules"
)

// Layer names an admission layer: the one that refused a request.
type Layer uint8

const (
	LayerRateLimit Layer = iota // Middleware: the rules' rate limits and quotas
	LayerInFlight               // InFlight: the caller's requests in flight
	LayerShed                   // Shedder: load shedding by priority
	LayerAdaptive               // Adaptive: a route's adaptive concurrency limit
)

var layerNames = [...]string{"rate_limit", "in_flight", "shed", "adaptive"}

// String returns rate_limit, in_flight, shed or adaptive.
func (l Layer) String() string {
	if int(l) < len(layerNames) {
		return layerNames[l]
	}
	return "layer(" + strconv.Itoa(int(l)) + ")"
}

// Cause is why a layer refused a request.
type Cause uint8

const (
	// OverLimit: the caller (429) or the server (503) is over a limit.
	OverLimit Cause = iota
	// Unavailable: the layer's store cannot decide and its failure policy
	// (ratelimit.FailurePolicy) refuses: deny or error, both 503.
	Unavailable
)

var causeNames = [...]string{"over_limit", "unavailable"}

// String returns over_limit or unavailable.
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
}

// DefaultUnavailableRetryAfter is the Retry-After of a refusal for a store
// that cannot decide (the deny failure policy) when
// Refusals.UnavailableRetryAfter is zero: the default breaker cooldown of
// redisstore and redisinflight, after which the store tries Redis again.
const DefaultUnavailableRetryAfter = time.Second

// Refusal is one request turned away by an admission layer, as
// Refusals.Write answers it and Refusals.Observe sees it.
type Refusal struct {
	Layer  Layer
	Cause  Cause
	Status int // 429 (the caller's own traffic is over) or 503 (the server is short, or cannot decide)
	// Policy names the limit that refused: a rule's policy name, the
	// in-flight policy, "shed", the adaptive policy. The body names it
	// (except in the Opaque header mode); a status page shows it as a row.
	Policy string
	// Rule is the rate limit's rule that refused; nil for the other layers.
	Rule *rules.Rule
	// Key is who or what was refused: the store key of a rate limit, the
	// caller's in-flight key, the shedder and class ("utilization:get"),
	// the adaptive limiter's name.
	Key string
	// RetryAfter is the wait sent as Retry-After, rounded up to whole
	// seconds; 0 sends none.
	RetryAfter time.Duration
	Detail     string // the problem's detail
	Err        error  // the store's error, for Unavailable
	// Denial is the layer's configured answer (Middleware.Denial,
	// InFlight.Denial); nil answers problem+json. It applies to an
	// OverLimit refusal of the rate limits or the in-flight cap only, and
	// Status is then the denial's status, as Observe sees it.
	Denial *Denial
	// Ctx is the refused request's context, for an observer that records
	// the request (an access log's method and path); nil where there is
	// no request.
	Ctx context.Context
}

// Refusals is the one writer of the admission layers' refusals (the rate
// limits, the in-flight cap, the shedders, the adaptive limit): status,
// Retry-After and an application/problem+json body (RFC 9457), the same
// for every layer, each refusal reported to Observe. The RateLimit headers
// are the layer's, set before it refuses (they describe the limits on
// admitted responses too). Give every layer of a server the same
// Refusals: its observer then sees every refusal, whichever layer made it.
//
// A nil *Refusals writes the same answers and observes nothing. Its
// fields must not change once a handler uses it.
type Refusals struct {
	// Observe, when set, is called once per refusal, before the answer is
	// written: for a status page, metrics, an event log. It must be fast
	// and safe for concurrent use.
	Observe func(Refusal)
	// UnavailableRetryAfter is the Retry-After of a refusal for a store
	// that cannot decide under the deny failure policy: the store's breaker
	// cooldown. 0 means DefaultUnavailableRetryAfter.
	UnavailableRetryAfter time.Duration
}

// unavailableRetry is the Retry-After of a deny-policy refusal.
func (rs *Refusals) unavailableRetry() time.Duration {
	if rs == nil || rs.UnavailableRetryAfter <= 0 {
		return DefaultUnavailableRetryAfter
	}
	return rs.UnavailableRetryAfter
}

// Write answers rf: it reports rf to Observe, then writes rf.Status with
// Retry-After and a problem body naming rf.Policy, or rf.Denial's status
// and body when it applies (see Denial). mode is the layer's header mode:
// Opaque leaves the policy out of the body, and a refusal for the
// caller's own limit (429) bare (no Retry-After, no detail: no quota
// information); a 503 keeps its Retry-After, which is about the server,
// not the caller's quota.
func (rs *Refusals) Write(w http.ResponseWriter, mode header.Mode, rf Refusal) {
	quota := rf.Status == http.StatusTooManyRequests
	denial := rf.Denial.applies(&rf)
	if denial && rf.Denial.status != 0 {
		rf.Status = rf.Denial.status
	}
	if rs != nil && rs.Observe != nil {
		rs.Observe(rf)
	}
	p := Problem{Status: rf.Status, Detail: rf.Detail, Policy: rf.Policy}
	retry := rf.RetryAfter
	if mode == header.Off {
		p.Policy = ""
		if quota {
			p.Detail, retry = "", 0
		}
	}
	secs := ratelimit.DurationCeil(retry)
	if secs > 0 {
		w.Header()["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
	}
	if denial && rf.Denial.parts != nil {
		rf.Denial.write(w, rf.Status, p.Policy, secs)
		return
	}
	WriteProblem(w, p)
}

// unavailable is the refusal of a layer whose store cannot decide under
// policy (FailDeny or FailError): 503, naming the cause. Deny tells when
// to come back (the breaker's cooldown); error reports the failure and
// promises nothing.
func (rs *Refusals) unavailable(ctx context.Context, l Layer, policy ratelimit.FailurePolicy, rule *rules.Rule, name, key, what string, err error) Refusal {
	rf := Refusal{Layer: l, Cause: Unavailable, Status: http.StatusServiceUnavailable, Policy: name, Rule: rule, Key: key, Err: err,
		Detail: "limiter unavailable: the " + what + " store cannot decide", Ctx: ctx}
	if policy == ratelimit.FailDeny {
		rf.RetryAfter = rs.unavailableRetry()
		rf.Detail += "; retry after the delay in Retry-After"
	}
	return rf
}

// overload is the refusal of a layer that turns a request away because
// the server is short, whoever the caller (Shedder, Adaptive): 503 with
// the layer's Retry-After and a problem body naming its policy.
type overload struct {
	layer      Layer
	policy     string
	retryAfter time.Duration
	refusals   *Refusals
}

// newOverload returns the overload refusal of layer l; a retryAfter ≤ 0
// is def.
func newOverload(l Layer, policy string, retryAfter, def time.Duration, rs *Refusals) overload {
	if retryAfter <= 0 {
		retryAfter = def
	}
	return overload{layer: l, policy: policy, retryAfter: retryAfter, refusals: rs}
}

// refuse answers the 503 for key (who or what was refused, Refusal.Key)
// with detail; ctx is the request's.
func (o *overload) refuse(ctx context.Context, w http.ResponseWriter, key, detail string) {
	o.refusals.Write(w, header.IETF, Refusal{Layer: o.layer, Status: http.StatusServiceUnavailable, Policy: o.policy,
		Key: key, RetryAfter: o.retryAfter, Detail: detail, Ctx: ctx})
}

// Identify resolves the caller with res, the identify step every layer
// shares; nil res identifies every caller by the IP of RemoteAddr. A bad
// credential (identity.ErrUnauthorized) is answered 401 with
// WWW-Authenticate, another failure of res 500 (logged to log); ok is
// false when it answered.
func Identify(w http.ResponseWriter, r *http.Request, res Identifier, log *slog.Logger) (id identity.Identity, ok bool) {
	if res == nil {
		return identity.Identity{IP: remoteIP(r.RemoteAddr)}, true
	}
	id, err := res.Resolve(r)
	if err == nil {
		return id, true
	}
	if errors.Is(err, identity.ErrUnauthorized) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeProblem(w, http.StatusUnauthorized, "invalid credentials", "")
		return id, false
	}
	if log != nil {
		log.Error("httplimit: identify caller", "err", err)
	}
	writeProblem(w, http.StatusInternalServerError, "cannot identify the caller", "")
	return id, false
}
