// Package retry runs an operation until it succeeds, within bounds: the
// retry loop, the Retry-After header and a retry budget.
//
// Do calls the operation, and after a retryable failure waits and calls it
// again. The defaults are those of the 429 handling guide sluice follows:
// at most 7 attempts (the first call and 6 retries), the backoff schedule of
// backoff.Recommended (500 ms–1 s before the first retry, 1–2 s before the
// second, … never more than 60 s), and then an error upstream that says how
// many attempts were made and what the last one returned:
//
//	retry: gave up after 7 attempts: httpclient: 429 Too Many Requests
//
// The operation tells Do what happened through its error:
//
//	nil                       success: Do returns nil and refills the budget
//	Permanent(err)            do not retry: Do returns err
//	WithDelay(err, d)         retry after d, the server's own delay (Retry-After), instead of the backoff
//	any other error           retry after the backoff's delay
//
// A server delay longer than Options.MaxDelay is not shortened: Do fails at
// once with a DelayTooLongError carrying the delay, since retrying early
// only earns another refusal. A wait that would end after the context's
// deadline also fails at once, and cancellation interrupts any wait.
//
// A Budget is a token bucket that retries spend and successes refill (the
// retry throttling of gRPC and the retry quota of the AWS SDKs): while a
// target fails everything, its retries stop after Capacity of them, and
// come back at one per 1/Refill successes. Package httpclient keeps one
// budget per host.
//
// ParseRetryAfter and RetryAfter read Retry-After in both of its RFC 9110
// forms, delta-seconds and HTTP-date (IMF-fixdate, and the obsolete RFC 850
// and asctime forms recipients must accept), clamped to [0, MaxRetryAfter].
package retry
