// Package httpclient is a polite HTTP client: an http.RoundTripper that
// limits itself per host, backs off with jitter, honours Retry-After, spends
// retries from a budget and stops when a breaker says so.
//
// One request through a Transport goes, per attempt:
//
//	breaker (per host)   open? fail at once with an error matching breaker.ErrOpen
//	hostlimit            wait: host not paused, a concurrency slot, a token of the host's bucket
//	base transport       send
//	classify             success, throttled (429/503), overloaded (5xx), timeout, block (403, challenge page)
//	feedback             AIMD rate, host pause after 429/503, breaker
//	retry                wait Retry-After or the backoff, spend from the host's budget, try again
//
// The zero Options are the documented defaults: each host's rate found by
// AIMD from 2 requests a second, 4 requests in flight per host, at most 7
// attempts with the recommended backoff (500 ms–1 s, 1–2 s, … 60 s at most),
// a retry budget of 20 per host refilled by a tenth of a token per success,
// a breaker per host that opens after 5 throttled answers in a row.
//
// Only requests that can be replayed are retried: idempotent methods (GET,
// HEAD, OPTIONS, TRACE, PUT, DELETE) or any request carrying an
// Idempotency-Key header, and only when the body is empty or can be
// rewound (Request.GetBody, which http.NewRequest sets for in-memory
// bodies). Any other request is sent once and its answer returned as is.
//
// When every attempt is spent, RoundTrip returns an error, not the last
// answer, that says how many attempts were made and what the last answer
// was, e.g. "retry: gave up after 7 attempts: httpclient: 429 Too Many
// Requests". errors.As finds a *StatusError in it.
//
// Observe what happens through Options.Observer: every attempt, retry,
// wait, host pause and breaker transition is an Event. Package httpclient
// itself has no metrics library: wire the events to one in your program
// (cmd/sluice does, for `sluice fetch`).
package httpclient
