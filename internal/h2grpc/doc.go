// Package h2grpc is a lean gRPC server: HTTP/2 over cleartext TCP (h2c
// with prior knowledge, as gRPC clients and Envoy's gRPC client speak it),
// for unary and server-streaming methods, with the generated
// protocol-buffers types and Register functions of grpc-go (Server
// implements grpc.ServiceRegistrar).
//
// It exists because the call is most of the work of a rate limit service.
// Deciding a request takes sluice's rls about 1 µs; grpc-go's server took
// 60–70% of the service's CPU in bench/rls. This server reads frames
// straight off a buffered reader, decodes headers with
// golang.org/x/net/http2/hpack, answers with header blocks encoded once,
// coalesces the answers of concurrent calls into one write, and runs
// handlers on a pool of goroutines whose stacks have grown. In bench/rls,
// measured in the same rounds, `sluice rls` spends 9.3–10.9 µs of CPU a
// call on it against 22.4–26.7 µs on grpc-go's server with the memory
// store, and 17.9–24.0 against 37.6–44.4 µs with Redis
// (docs/bench-rls.md).
//
// What it serves, and what it keeps of HTTP/2 (RFC 9113):
//
//   - Unary and server-streaming methods. A method that streams from the
//     client is answered UNIMPLEMENTED: the handler runs once the client
//     has sent its whole request.
//   - Flow control both ways: a 1 MiB connection receive window given back
//     as data arrives, HTTP/2's 64 KiB stream windows, and the client's
//     windows honored for every DATA frame sent (a handler waits for
//     WINDOW_UPDATE).
//   - SETTINGS, PING, GOAWAY and RST_STREAM as the RFC requires; frame,
//     header-list and message size limits; protocol violations end the
//     connection with GOAWAY and the matching error code, malformed
//     requests their stream.
//   - MAX_CONCURRENT_STREAMS counts streams until their handlers return, so
//     a client resetting streams as fast as it opens them (CVE-2023-44487)
//     cannot run more handlers than the limit; CONTINUATION floods are
//     bounded by the header-list limit.
//   - grpc-timeout becomes the handler's context deadline; RST_STREAM, the
//     deadline, and the connection's end cancel it.
//   - Status codes, messages (percent-encoded) and details
//     (grpc-status-details-bin); header and trailer metadata from streaming
//     handlers.
//   - GracefulStop (GOAWAY, calls in flight finish) and Stop.
//
// What it leaves out: TLS, compression (a compressed request is answered
// UNIMPLEMENTED), incoming metadata in the handler's context,
// interceptors, stats handlers and reflection. Where those are needed,
// serve with grpc-go: `sluice rls --grpc-server grpc-go`.
package h2grpc
