package rls

import (
	"runtime"

	"google.golang.org/grpc"
)

// ServerOptions returns the grpc.ServerOptions `sluice rls --grpc-server
// grpc-go` serves with:
//
//   - Stream workers (grpc.NumStreamWorkers), 32 per CPU up to 1024: a call
//     runs on a goroutine that has served calls before, whose stack has
//     grown already. Without them grpc-go starts a goroutine per call, and
//     growing its stack (runtime.copystack) took 11–15% of the server's CPU
//     under bench/rls's load. Calls beyond the workers get a goroutine of
//     their own, as without workers.
//   - Write buffers shared between connections (Envoy keeps one
//     connection per worker thread open to its rate limit service, mostly
//     idle between bursts).
//
// Larger flow-control windows (which turn off grpc-go's BDP pings) and
// read/write buffer sizes made no difference beyond the noise in
// bench/rls, so they are left at gRPC's defaults.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.SharedWriteBuffer(true),
		grpc.NumStreamWorkers(uint32(streamWorkers(runtime.GOMAXPROCS(0)))),
	}
}

// streamWorkers is the stream worker pool for procs CPUs.
func streamWorkers(procs int) int { return min(1024, 32*max(1, procs)) }
