// Package sim runs deterministic discrete-event simulations of both sides
// of HTTP 429 on sluice's own code: the backoff strategies, the limiter
// steps of algorithm/gcra, algorithm/window and algorithm/slidinglog, memstore
// with the simulation's clock as its Now, and the adaptive controllers.
// Nothing is re-implemented for the simulation, so what it shows is what
// production code does.
//
// A [engine] is a virtual clock and a queue of events ordered by time (ties in
// the order they were scheduled), with a PCG random source seeded per run.
// No real clock is read and no goroutine races another, so the same seed
// gives the same result, byte for byte; independent runs may execute in
// parallel because each has its own engine and writes its own result slot.
//
// Each scenario is a function from an Options struct (whose zero value is
// the scenario as published) to a result with typed rows, a [table] (stable
// text, JSON or CSV) and a [figure] (SVG, drawn with the standard library):
//
//	Brooker      Brooker's "Exponential Backoff And Jitter" (2015): N clients,
//	             one row, optimistic concurrency; calls and completion time
//	ObjectStore  seed 002: 9 writes into a budget of 5 per tick, with backoff
//	             and with retrying at once
//	AIMD         adaptive.AIMD against a server whose capacity is hidden and
//	             changes: the sawtooth and the 429 fraction
//	Buckets      one bursty trace through token bucket, leaky bucket queue,
//	             fixed window and sliding window counter
//	Windows      sliding window counter vs the exact log: wrong decisions and
//	             the gap, Cloudflare's measure
//	Overload     adaptive.Gradient and adaptive.Vegas on an I/O-bound service
//	             at 0.5x, 2x, 5x of capacity, then capacity halved and
//	             restored, against an oracle fixed limit and no limit
//	Regions      seed 003's two regions: a Redis per region (up to 2x the
//	             limit) against a home region per key (exact, a cross-region
//	             round trip for the other region's requests)
//
// overloadCPU is the one part that is not a simulation: it drives a real
// CPU-bound HTTP server (serveCPU) in a process of its own over loopback,
// in real time, for a bounded time; its figures depend on the machine.
//
// The command "sluice sim NAME" runs them; docs/simulations.md shows each
// figure with the command that drew it.
package sim
