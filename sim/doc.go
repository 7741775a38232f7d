// Package sim runs deterministic discrete-event simulations of both sides
// of HTTP 429 on sluice's own code: the backoff strategies, the limiter
// steps of algorithm/gcra, algorithm/window and algorithm/slidinglog, memstore
// with the simulation's clock as its Now, and the adaptive controllers.
// Nothing is re-implemented for the simulation, so what it shows is what
// production code does.
//
// Each run has a virtual clock, a queue of events ordered by time (ties in
// the order they were scheduled) and a PCG random source seeded per run.
// No real clock is read and no goroutine races another, so the same seed
// gives the same result, byte for byte; independent runs may execute in
// parallel because each has its own clock and writes its own result slot.
//
// [Scenarios] lists the simulations "sluice sim NAME" runs; a [Scenario]
// takes its options as flags ([Scenario.Flags]) and returns a [Result]: a
// table (stable text, JSON or CSV) and a figure (SVG, drawn with the
// standard library):
//
//	brooker      Brooker's "Exponential Backoff And Jitter" (2015): N clients,
//	             one row, optimistic concurrency; calls and completion time
//	objectstore  the object-store throttling example: 9 writes into a budget
//	             of 5 per tick, with backoff and with retrying at once
//	aimd         adaptive.AIMD against a server whose capacity is hidden and
//	             changes: the sawtooth and the 429 fraction
//	buckets      one bursty trace through token bucket, leaky bucket queue,
//	             fixed window and sliding window counter
//	windows      sliding window counter vs the exact log: wrong decisions and
//	             the gap, Cloudflare's measure
//	overload     adaptive.Gradient and adaptive.Vegas on an I/O-bound service
//	             ([IOModel]) at 0.5x, 2x, 5x of capacity, then capacity halved
//	             and restored, against an oracle fixed limit and no limit
//	regions      the rate-limiting design article's two regions: a Redis per
//	             region (up to 2x the limit) against a home region per key
//	             (exact, a cross-region round trip for the other region's
//	             requests)
//
// "overload --cpu" is the one part that is not a simulation: it drives a
// real CPU-bound HTTP server in a process of its own over loopback, in
// real time, for a bounded time; its figures depend on the machine.
// [RealTime] runs the overload model in real time too, for limiters of
// other libraries ([OverloadContender]) that read the wall clock.
//
// docs/simulations.md shows each figure with the command that drew it.
package sim
