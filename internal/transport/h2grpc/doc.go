// Package h2grpc is a lean gRPC server: HTTP/2 over cleartext TCP (h2c
// with prior knowledge, as gRPC clients and Envoy's gRPC client speak it)
// or over TLS (Options.TLS: ALPN "h2" required), for unary and server-streaming methods (and, a message at a
// time, those that stream from the client), with the generated
// protocol-buffers types and Register functions of grpc-go (Server
// implements grpc.ServiceRegistrar).
//
// It exists because the call is most of the work of a rate limit service.
// Deciding a request takes sluice's rls about 1 µs; grpc-go's server took
// 60–70% of the service's CPU in bench/rls. This server reads frames
// straight off a buffered reader, decodes headers with
// golang.org/x/net/http2/hpack, answers with header blocks encoded once,
// coalesces the answers of concurrent calls into one write, and runs
// handlers on a pool of goroutines whose stacks have grown. On Linux it
// reads and writes a TCP connection's socket with system calls the
// scheduler is not told about (through the connection's poller, so
// deadlines and Close hold): an ordinary one wakes the runtime's monitor
// thread when the process was idle and may hand the caller's P to another
// thread, two to three futex and nanosleep calls a request at moderate
// load (docs/bench-rls.md, "Fewer wake-ups"). A listener wrapped by
// LimitListener keeps that; golang.org/x/net/netutil's hides the socket.
// In bench/rls,
// measured in the same rounds, `sluice rls` spends 9.3–10.9 µs of CPU a
// call on it against 22.4–26.7 µs on grpc-go's server with the memory
// store, and 17.9–24.0 against 37.6–44.4 µs with Redis
// (docs/bench-rls.md).
//
// What it serves, and what it keeps of HTTP/2 (RFC 9113):
//
//   - Unary and server-streaming methods: the handler runs once the
//     client has sent its whole request. A method that streams from the
//     client (gRPC reflection's ServerReflectionInfo) runs its handler at
//     once and gets each message as it arrives, bounded a message at a
//     time (bidi.go): a message fits the stream's window, its credit
//     comes back once the handler has taken it, the next comes within
//     RequestTimeout of the last, and at most 8 such calls are open on a
//     connection. The unary path does not go through it.
//   - Flow control both ways. A request's bytes count against its
//     stream's window and the connection's until its handler returns,
//     and only then are they given back (WINDOW_UPDATE): credit follows
//     consumption, not receipt. Streams keep HTTP/2's 64 KiB windows; a
//     request message larger is granted the rest of its length, in the
//     order messages ask, from the part of the connection's window left
//     after every stream's. DATA past a window is a connection error
//     (FLOW_CONTROL_ERROR). Responses keep to the client's windows and
//     wait for room in a bounded send queue.
//   - SETTINGS, PING, GOAWAY and RST_STREAM as the RFC requires; frame,
//     header-list and message size limits; protocol violations end the
//     connection with GOAWAY and the matching error code, malformed
//     requests their stream.
//   - MAX_CONCURRENT_STREAMS counts streams until their handlers return, so
//     a client resetting streams as fast as it opens them (CVE-2023-44487)
//     cannot run more handlers than the limit; a stream past it is refused
//     (RST_STREAM REFUSED_STREAM). CONTINUATION floods are bounded by the
//     header-list limit, past which HPACK decodes but keeps nothing; the
//     HPACK table is HTTP/2's 4096 bytes.
//   - grpc-timeout becomes the handler's context deadline; RST_STREAM, the
//     deadline, and the connection's end cancel it.
//   - Status codes, messages (percent-encoded) and details
//     (grpc-status-details-bin); header and trailer metadata from streaming
//     handlers.
//   - GracefulStop (GOAWAY, calls in flight finish) and Stop.
//   - Connection age and idleness, as grpc-go's keepalive
//     MaxConnectionAge, MaxConnectionAgeGrace (with its ±10% jitter) and
//     MaxConnectionIdle: GOAWAY, then the connection closes once its
//     calls have finished or the grace has run out. Idleness is the
//     lack of progress (no request received whole, no handler running),
//     not of open streams. A client that never sends its preface is
//     closed after 20 s.
//   - Streams that must progress (StreamLimits): a request must arrive
//     whole within RequestTimeout, a write of an answer may wait on the
//     client (window, send queue) for WriteTimeout, and a client may
//     reset ResetRate streams a second past ResetBurst; past any, the
//     connection ends. Guard holds grpc-go's server to the same.
//
// # What one connection holds
//
// One connection never holds more than 40 MiB with the default Options,
// whatever its client sends or leaves unread (besides what handlers
// themselves allocate: their goroutines, the requests they decode, a
// response each marshals). With S = MaxConcurrentStreams (256), W =
// InitialWindowSize (65535), M = MaxRecvMsgSize (4 MiB), C =
// InitialConnWindowSize (32 MiB), Q = MaxSendQueue (4 MiB) and H =
// MaxHeaderListSize (64 KiB):
//
//   - Requests: at most C = 32 MiB. Every byte received counts against
//     the connection's window until its handler has returned (or the
//     stream is reset, or the bytes are dropped); the client cannot send
//     past it. A stream's buffer is never larger than its window, or 64
//     KiB if that is more, and the windows of S streams plus the grants
//     to large messages fit in C: S × 64 KiB = 16 MiB, a reserve of C −
//     16 MiB − 64 KiB ≈ 15.9 MiB (four messages of M at once), and 64 KiB
//     of credit not yet given back. C is raised to at least S × max(W, 64
//     KiB) + M + 5 − W + 64 KiB, so that a client keeping to the windows
//     never waits on the connection's window while a stream may send.
//   - Responses: at most 1.25 × (Q + 1 MiB) + 256 KiB ≈ 6.5 MiB. A
//     handler's frames wait while Q = 4 MiB are queued or being written;
//     the server's own (acknowledgements, WINDOW_UPDATE, RST_STREAM,
//     refusals) may add 1 MiB, past which the connection ends; a slice
//     has at most a quarter of its length spare, and one 256 KiB buffer
//     is kept for the next write.
//   - The rest: a 32 KiB read buffer, a 16 KiB frame, HPACK's 4 KiB
//     table, at most 4 × H = 256 KiB for the field HPACK is decoding and
//     the fields a request keeps (decoding stops keeping them past H),
//     and under 1 KiB of state a stream: 0.6 MiB with S = 256.
//
// In all, 32 + 6.5 + 0.6 ≈ 39.1 MiB. TestRecvBound sends 512 MiB of
// requests on 256 streams whose handlers block: the client is stuck after
// 32 MiB and the server's heap grows by about 35 MB (it took all 512 MiB
// when credit came back on receipt). TestSendQueueBound has 8 handlers
// stream 512 MiB each to a client that reads nothing.
//
// What it leaves out: compression (a compressed request is answered
// UNIMPLEMENTED), incoming metadata in the handler's context (but for
// the headers Options.Metadata names),
// interceptors and stats handlers. Where those are needed,
// serve with grpc-go: `sluice rls --grpc-server grpc-go`.
package h2grpc
