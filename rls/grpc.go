package rls

import "google.golang.org/grpc"

// ServerOptions returns the grpc.ServerOptions `sluice rls` serves with:
// write buffers shared between connections (Envoy keeps one connection per
// worker thread open to its rate limit service, mostly idle between
// bursts).
//
// Stream worker pools (grpc.NumStreamWorkers) and larger flow-control
// windows made no difference beyond the noise in bench/rls, so they are
// left at gRPC's defaults.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.SharedWriteBuffer(true)}
}
