// Package breaker is a circuit breaker that trips on throttling, not only
// on server errors.
//
// A Breaker is closed while calls succeed. After Threshold failures in a row
// (the caller decides what a failure is: package httpclient counts 429 and
// 503 answers, 5xx and timeouts) it opens: calls fail at once with an
// OpenError, for max(the last Retry-After, the backoff for this opening).
// Then it half-opens and lets exactly one probe through: a success closes
// it, a failure opens it again for the next, longer, backoff.
//
//	closed --Threshold failures--> open --max(Retry-After, backoff)--> half-open
//	half-open --probe succeeds--> closed
//	half-open --probe fails-----> open (next backoff)
//
// Time is an argument of every method, never read from the clock, so the
// breaker runs the same on a virtual clock in a simulation.
//
// It is a package of its own, rather than part of retry, because it is not
// part of any one call's retry loop: it holds state across calls (package
// httpclient keeps one per host) and says no before a call is made.
package breaker
