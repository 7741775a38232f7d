// Package adaptive finds a rate nobody published: controllers that adjust
// a limit from the signals a server sends back.
//
// AIMD is additive increase, multiplicative decrease, the control law of TCP
// congestion avoidance, applied to a request rate. It starts in slow start,
// doubling the rate every SlowStartInterval of success until the first
// congestion signal; since the rate overshoots in slow start, it then falls
// to just under the rate the host actually served. From then on each
// congestion signal multiplies the rate by Decrease (after a 429, the rate
// that got through, if lower), and each Interval in which every response
// succeeded raises it: halfway back to just under the rate at which the
// last cut happened (the binary-search recovery of BIC-TCP), never by less
// than Increase; there it holds for Hold intervals, then probes for a new
// maximum, adding Increase, then twice that, and so on (at most a quarter
// of the rate per Interval). The rate thus spends its time just under the
// host's limit, crossing it once per cycle.
//
// Congestion signals are throttling (429 and 503 answers), timeouts, and
// latency: when the smoothed latency rises well above its baseline
// (Tolerance times, and by MinRise), the rate eases off before the server
// starts refusing. A Retry-After acts as a floor on the recovery: no
// increase happens before it has passed.
//
// One cut per window: signals about requests sent before the last decrease
// do not cut again, so a burst of concurrent 429s cuts the rate once, not
// once per request (TCP makes the same rule, one reduction per window); and
// at most two cuts per Interval, since an emptied server bucket refuses for
// a while whatever the new rate.
//
// Blocks are not congestion: a 403 or a challenge page says "no", not
// "slower", and Block leaves the rate alone (the caller should stop, not
// wait). Telling the two apart is the caller's classifier's job (see
// package httpclient): this package only sees Signals.
//
// Time is an argument of every method, never read from the clock: a
// simulation drives the controller on a virtual clock.
//
// # Adaptive concurrency
//
// [Gradient] and [Vegas] limit the requests in flight instead of their
// rate, with no static number to guess: the limit follows the ratio of the
// no-load latency (minRTT) to the latency now, and settles where latency
// starts to rise (Netflix's concurrency-limits, Envoy's
// adaptive_concurrency filter). Both implement [Limiter]: Acquire admits
// or refuses at once (a server answers 503, see httplimit.Adaptive; a client
// fails fast or waits), and the [Token] it returns is released with Done,
// Dropped or Ignore. Acquire and release allocate nothing.
//
// Two bugs run through the history of these controllers, and both are
// excluded here by construction and by a test that fails on the buggy
// variant: a baseline that drifts up during a long overload, so that the
// limit stops falling (the baseline only goes down between probes, and a
// probe measures it under a pinned, lower limit, every Interval plus
// jitter, as Envoy does); and a constant queue allowance added to every
// update, so that the limit keeps rising while overloaded (a queue only
// ever lowers the limit). Growth is bounded per window, and the limit
// stays between a floor and a ceiling.
//
// A limit that fell (the service slowed: its capacity halved) remembers
// the level it held before, and recalls it in one window once the latency
// drops at a limit no lower than before, to near the baseline, with
// demand refused: the service is fast again, and growth steps alone
// would take several windows to find it.
//
// Their clock is LimiterOptions.Now, so a simulation drives them on
// virtual time (see "sluice sim overload").
package adaptive
