package rls

import (
	"crypto/tls"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
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

// Transport is what `sluice rls` sets of its gRPC connections on either
// server: TLS, and how long a connection may live and idle.
type Transport struct {
	// TLS, when set, serves TLS (mutual when it requires client
	// certificates); its NextProtos must offer "h2".
	TLS *tls.Config
	// MaxConnectionAge ends a connection with GOAWAY after about that
	// long (±10%, grpc-go's jitter); MaxConnectionAgeGrace bounds the
	// calls in flight then; MaxConnectionIdle ends a connection with no
	// call for that long. Zero is no bound (envoyproxy/ratelimit's
	// GRPC_MAX_CONNECTION_AGE and _GRACE default to 24h and 1h).
	MaxConnectionAge, MaxConnectionAgeGrace, MaxConnectionIdle time.Duration
	// RequestTimeout bounds the time a call's request may take to arrive
	// whole, WriteTimeout the time a write of its answer may wait on the
	// client; ResetRate bounds the streams a second a client may reset,
	// ResetBurst at once. Past any, the connection ends. Zero is no
	// bound. The transport enforces them (sluice rls: h2grpc's
	// StreamLimits, on grpc-go's server through the credentials
	// GRPCOptions is given).
	RequestTimeout, WriteTimeout time.Duration
	ResetRate, ResetBurst        int
}

// GRPCOptions returns ServerOptions with t's credentials and keepalive
// parameters, for grpc-go's server. wrap, when not nil, wraps the
// credentials (TLS, or none): sluice rls's hold connections to t's
// stream bounds.
func (t Transport) GRPCOptions(wrap func(credentials.TransportCredentials) credentials.TransportCredentials) []grpc.ServerOption {
	opts := ServerOptions()
	creds := insecure.NewCredentials()
	if t.TLS != nil {
		creds = credentials.NewTLS(t.TLS)
	}
	if wrap != nil {
		creds = wrap(creds)
	}
	opts = append(opts, grpc.Creds(creds))
	// grpc-go reads zero as infinity.
	return append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionIdle:     t.MaxConnectionIdle,
		MaxConnectionAge:      t.MaxConnectionAge,
		MaxConnectionAgeGrace: t.MaxConnectionAgeGrace,
	}))
}
