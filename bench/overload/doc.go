// Package overload runs sluice's adaptive concurrency limiters and their
// peers side by side in one run, in the I/O-bound overload model of
// "sluice sim overload" (sim.IOModel: latency grows with the requests in
// flight past capacity; 0.5x, 2x, 5x of capacity, then capacity halved,
// then restored), and measures acquire+release of each.
//
// The peers read the wall clock inside (failsafe-go's adaptivelimiter,
// platinummonkey/go-concurrency-limits, go-zero's shedder), so the model
// cannot run them in virtual time as sluice sim does: here (sim.RealTime)
// every contender runs in real time, all at once, each on its own copy of
// the model and the same arrival draws, so that timer noise and machine
// load fall on all of them alike. The rows are those of sluice sim
// overload, and the goodput of each phase is compared with the oracle's
// (a fixed limit equal to the true capacity) from the same run.
//
// Pinned peers (bench/go.mod): github.com/failsafe-go/failsafe-go v0.9.8
// (adaptivelimiter, bulkhead), github.com/platinummonkey/go-concurrency-limits
// v0.8.0 (Vegas, Gradient2 in its DefaultLimiter), github.com/zeromicro/go-zero
// v1.10.3 (core/load adaptive shedder).
//
// RunHTTP is a second, harder model: a real net/http server on 127.0.0.1
// whose handler burns CPU behind each contender in turn (bimodal: one
// request in ten 10x slower), under open-loop clients at 0.5x and 2x of
// its measured capacity, then 2x of clients that retry at once (a retry
// storm) and that back off. Medians and Beaten fold paired rounds of
// either model and name the peers better than a sluice limiter on both
// goodput and p99.
//
// Run the comparison with
//
//	cd bench && go run ./overload/cmd/overload-compare
//	cd bench && go run ./overload/cmd/overload-compare -model both -rounds 5 -phase 3s -http-phase 2s
//
// and the micro-benchmarks with
//
//	cd bench && go test -run '^$' -bench . -benchtime 200ms ./overload
package overload
