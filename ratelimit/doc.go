// Package ratelimit is sluice's shared vocabulary: a Limit (Rate events per
// Period, bursts of Burst), the Algorithm that enforces it, the Request a
// Store applies and the Decision it returns.
//
// Six algorithms are available. GCRA (the zero value), TokenBucket and
// LeakyBucket are bucket algorithms with one timestamp of state per key and
// admit exactly the same requests; LeakyBucket also delays each admitted
// request to its slot in the queue (Decision.Delay). FixedWindow,
// SlidingWindowCounter and SlidingWindowLog count events in windows of
// Period. The algorithms themselves are pure functions in sluice's internal
// packages; stores (memstore in process, redisstore across a fleet) run them
// and keep their state.
//
// A denial is a Decision with Allowed false; an error from Store.Apply means
// the store failed. A request costing more than the limit's capacity can
// never be admitted and says so with Decision.Unsatisfiable.
//
// Limiter binds a store, an algorithm and a limit: Allow for servers, Wait
// for clients.
package ratelimit
