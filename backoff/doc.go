// Package backoff computes how long to wait before a retry.
//
// A Strategy maps a retry number to a delay: Delay(1) is the wait before the
// first retry, Delay(2) before the second, and so on. Strategies are values
// with no state, safe for concurrent use and cheap to copy; jittered ones
// draw from their Rand field, which a simulation can seed.
//
// Every strategy below except Multiplicative shares one ceiling, Brooker's
// base·2^attempt capped at Max (AWS Architecture Blog, "Exponential Backoff
// and Jitter", 2015):
//
//	ceiling(n) = min(Max, Base·2^n)
//
//	Exponential    ceiling(n)                         no jitter: synchronised clients stay synchronised
//	FullJitter     U(0, ceiling(n))                   least total work; may retry almost at once
//	EqualJitter    ceiling(n)/2 + U(0, ceiling(n)/2)  never less than half the ceiling
//	Decorrelated   min(Max, U(Base, 3·previous))      Brooker's decorrelated jitter
//	Multiplicative min(Max, Base·2^(n-1)·U(0.5, 1.5)) the ±50% jitter of a common 429 guide
//
// The zero EqualJitter is the recommended schedule of the 429 handling guide
// sluice follows (Base 500 ms, Max 60 s), see [Recommended]:
//
//	retry  delay
//	1      500 ms – 1 s
//	2      1 s – 2 s
//	3      2 s – 4 s
//	4      4 s – 8 s
//	5      8 s – 16 s
//	6      16 s – 32 s
//	7      30 s – 60 s (capped)
//
// The same guide's pseudocode, delay·U(0.5, 1.5) with delay = 500 ms·2^(n-1),
// is a different schedule (250–750 ms, 500 ms–1.5 s, …): that is
// Multiplicative.
//
// Most callers should not pick a strategy at all: package retry and package
// httpclient default to EqualJitter, which never retries sooner than half
// the ceiling after a 429.
package backoff
