package rls

import (
	"runtime"

	"google.golang.org/grpc"
)

// ServerOptions returns the grpc.ServerOptions `sluice rls` serves with,
// tuned for many small unary calls: a fixed pool of stream workers (their
// goroutines keep their grown stacks, where one goroutine per call would
// grow a fresh stack each time) and write buffers shared between
// connections.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.SharedWriteBuffer(true),
	}
}
