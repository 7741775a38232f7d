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
//
//   - Write buffers shared between connections (Envoy keeps one
//     connection per worker thread open to its rate limit service, mostly
//     idle between bursts).
//
//   - Bounds on what one connection may make the server hold
//     (DESIGN's principle 8; grpc-go's defaults have none: an unlimited
//     number of streams, 4 MiB messages, windows that grow with BDP
//     probes): at most MaxStreams concurrent streams, messages of at most
//     MaxRecvMsgSize (a RateLimitRequest is a few hundred bytes; 128 KiB
//     holds thousands of descriptors), and static 64 KiB stream windows
//     (a 1 MiB connection window). grpc-go reads a unary request whole
//     before calling the handler, so one connection holds at most
//     MaxStreams × (MaxRecvMsgSize + 64 KiB) = 48 MiB of requests. Larger
//     windows made no difference beyond the noise in bench/rls.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.SharedWriteBuffer(true),
		grpc.NumStreamWorkers(uint32(streamWorkers(runtime.GOMAXPROCS(0)))),
		grpc.MaxConcurrentStreams(MaxStreams),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.InitialWindowSize(64 << 10),
		grpc.InitialConnWindowSize(1 << 20),
		grpc.MaxHeaderListSize(64 << 10),
	}
}

// Bounds of the grpc-go server (ServerOptions).
const (
	MaxStreams     = 256       // concurrent streams per connection
	MaxRecvMsgSize = 128 << 10 // bytes of one request message
)

// streamWorkers is the stream worker pool for procs CPUs.
func streamWorkers(procs int) int { return min(1024, 32*max(1, procs)) }
