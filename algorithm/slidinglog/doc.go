// Package slidinglog is the sliding window log as a pure step: the time and
// cost of every admitted request in the last Limit.Period, so the count is
// exact at every instant. A request is admitted when the costs logged in
// (now−Period, now] plus its own are at most Limit.Rate.
//
// Memory per key is O(Rate): up to Rate entries of 16 bytes (fewer with
// weighted costs). Use it where exactness matters and rates are low (login,
// payments); prefer SlidingWindowCounter (two counters) at scale.
package slidinglog
