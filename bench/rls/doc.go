// Package rls compares `sluice rls` with envoyproxy/ratelimit side by side:
// both servers run as processes on one redis-server with one configuration
// directory (config/bench.yaml, in envoyproxy/ratelimit's format), and one
// client sends both the same requests.
//
// Agree replays one deterministic request stream (Stream) against both,
// request by request, and compares every field of every answer: fixed
// windows, away from window boundaries, must give identical decisions.
// Measure drives one server with a closed-loop load generator (callers
// goroutines over conns gRPC connections) and reports requests per second,
// latency percentiles and the CPU time of the server, Redis and the
// generator itself; the command rls-compare interleaves the servers in
// rounds. The generator's client is RawConn by default (requests
// marshalled once and sent as pre-built HTTP/2 frames, about 13 µs of CPU
// a call against grpc-go's 46 on the benchmark machine), so that on a
// small machine it leaves the CPU to the servers it measures; grpc-go's
// client is an option. Both servers always get the same one. See docs/bench-rls.md for figures and the command.
//
// Sweep measures the servers at fixed offered rates (Load.Rate: open
// loop, request i sent at start + i/Rate) and at saturation, with the
// project's client and with ghz (GHZ, installed by InstallGHZ at
// GHZVersion, given the protoset Protoset builds from go-control-plane's
// descriptors), in paired rounds; SweepTable writes the comparison. The
// command rls-sweep runs it against envoyproxy/ratelimit's capacity on
// the machine.
//
// envoyproxy/ratelimit is built from its Go module (BuildEnvoy runs go
// install at EnvoyVersion), sluice from this tree (BuildSluice).
package rls
