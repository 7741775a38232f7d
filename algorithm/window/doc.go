// Package window holds the two counting-window algorithms as pure steps:
// the fixed window and the sliding window counter. Both count events in
// windows of Limit.Period aligned to the Unix epoch and admit at most
// Limit.Rate per window; Limit.Burst is not used.
//
// FixedWindow admits a request when the current window's count plus its
// cost is at most Rate. Its weakness is the boundary: Rate events at the end
// of one window and Rate more at the start of the next pass within a moment.
//
// SlidingWindowCounter (Cloudflare's and Figma's formula) estimates the
// events of the last Period as prev·(Period−elapsed)/Period + curr, where
// prev and curr are the previous and current fixed windows' counts and
// elapsed is the time since the current window began. The estimate is
// computed in float64 in exactly this order —
//
//	est  := float64(prev) * float64(Period-elapsed) / float64(Period)
//	used := est + float64(curr)
//	admit when used+float64(n) <= float64(Rate)
//
// — so that the Redis store's Lua scripts (IEEE doubles too) decide
// identically.
package window
