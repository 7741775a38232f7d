// Package shed is load shedding by priority: the two load shedders of
// Stripe's four layers, which look at the whole system rather
// than at one caller and drop the least important work first when it
// saturates.
//
//   - [Fleet] (layer 3, fleet usage): one in-flight cap shared by a
//     fleet through an inflight.Store (a Redis store makes it global),
//     with a share of it reserved for critical requests: the other
//     classes may only hold Cap × (1 − Reserved) between them.
//   - [Utilization] (layer 4, worker utilization): per process. Above a
//     utilization threshold (0.8) of its capacity it sheds an amount that
//     grows linearly with the utilization, spread over the priority
//     classes in order (test-mode traffic first, then GETs, then POSTs,
//     critical last), and that amount follows its target slowly, over a
//     ramp of 120 s, so that the shedder does not flap.
//
// Requests are put in a [Class]: an index into a [Classes] order, the
// first class shed first. Neither shedder knows HTTP; httplimit's
// middleware classifies requests (by route, method or a header a trusted
// proxy sets) and answers a shed request 503 with Retry-After and an
// application/problem+json body.
//
// Time is an input: Utilization reads its clock (UtilizationOptions.Now)
// once per decision and moves its amount once per Interval, so tests
// drive the ramp exactly. [Step] is one move, written so that
// Stripe's integer-division slip (its resting shed amount −28/120 is −1 in
// Ruby) cannot happen: the same step here is −0.233.
package shed
