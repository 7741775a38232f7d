package runner

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/tlsreload"
	"github.com/sluicehq/sluice/internal/transport/h2grpc"
	"github.com/sluicehq/sluice/rls"
)

// grpcTransportFlags are sluice rls's TLS, connection-age and stream
// flags, the same on both gRPC servers.
type grpcTransportFlags struct {
	cert, key, clientCA, clientSAN string
	age, grace, idle               time.Duration
	reqTimeout, writeTimeout       time.Duration
	resetRate, resetBurst          int
}

func (t *grpcTransportFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&t.cert, "grpc-tls-cert", "", "PEM certificate chain `FILE`: serve gRPC over TLS (ALPN h2) with it and --grpc-tls-key, both reloaded when they change")
	fs.StringVar(&t.key, "grpc-tls-key", "", "PEM private key `FILE` of --grpc-tls-cert")
	fs.StringVar(&t.clientCA, "grpc-tls-client-ca", "", "PEM CA bundle `FILE`: require gRPC clients to present a certificate it verifies (mTLS); reloaded when it changes")
	fs.StringVar(&t.clientSAN, "grpc-tls-client-san", "", "with --grpc-tls-client-ca, the subject alternative `NAME` (DNS, URI, IP or e-mail) a client certificate must carry")
	fs.DurationVar(&t.age, "max-connection-age", 24*time.Hour, "end each gRPC connection with GOAWAY after about this long (±10% jitter), so clients reconnect and spread over instances; 0: never")
	fs.DurationVar(&t.grace, "max-connection-age-grace", time.Hour, "after --max-connection-age, how long calls in flight have before the connection is closed; 0: as long as they take")
	fs.DurationVar(&t.idle, "max-connection-idle", 5*time.Minute, "end a gRPC connection that made no progress for this long (GOAWAY): no request received whole and no call running, whatever streams it keeps open; frees its --max-connections slot; 0: never")
	fs.DurationVar(&t.reqTimeout, "grpc-request-timeout", h2grpc.DefaultRequestTimeout, "most time from a gRPC call's HEADERS until its request has arrived whole; past it the connection gets GOAWAY and is closed, freeing its --max-connections slot; 0: none")
	fs.DurationVar(&t.writeTimeout, "grpc-write-timeout", h2grpc.DefaultWriteTimeout, "most time one write of a gRPC answer may wait on the client (a spent or zero flow-control window, or a socket it does not read); past it the connection is closed; 0: none")
	fs.IntVar(&t.resetRate, "grpc-reset-rate", h2grpc.DefaultResetRate, "streams a second one gRPC connection may reset (RST_STREAM; rapid reset, CVE-2023-44487), past --grpc-reset-burst at once; beyond, GOAWAY ENHANCE_YOUR_CALM and the connection is closed; 0: no bound")
	fs.IntVar(&t.resetBurst, "grpc-reset-burst", h2grpc.DefaultResetBurst, "streams one gRPC connection may reset at once, before --grpc-reset-rate applies")
}

func (t *grpcTransportFlags) check() error {
	switch {
	case (t.cert == "") != (t.key == ""):
		return fmt.Errorf("%w: --grpc-tls-cert and --grpc-tls-key go together", ErrUsage)
	case t.clientCA != "" && t.cert == "":
		return fmt.Errorf("%w: --grpc-tls-client-ca needs --grpc-tls-cert and --grpc-tls-key", ErrUsage)
	case t.clientSAN != "" && t.clientCA == "":
		return fmt.Errorf("%w: --grpc-tls-client-san needs --grpc-tls-client-ca", ErrUsage)
	case t.age < 0 || t.grace < 0 || t.idle < 0:
		return fmt.Errorf("%w: --max-connection-age, --max-connection-age-grace and --max-connection-idle cannot be negative", ErrUsage)
	case t.reqTimeout < 0 || t.writeTimeout < 0 || t.resetRate < 0:
		return fmt.Errorf("%w: --grpc-request-timeout, --grpc-write-timeout and --grpc-reset-rate cannot be negative", ErrUsage)
	case t.resetRate > 0 && t.resetBurst < 1:
		return fmt.Errorf("%w: --grpc-reset-burst %d: want at least 1", ErrUsage, t.resetBurst)
	}
	return nil
}

// mode names what the gRPC listener serves, for the start line.
func (t *grpcTransportFlags) mode() string {
	switch {
	case t.clientCA != "":
		return "mtls"
	case t.cert != "":
		return "tls"
	}
	return "h2c"
}

// transport loads the certificate files (the first load must succeed)
// and registers the certificate's metrics with reg.
func (t *grpcTransportFlags) transport(log *slog.Logger, reg prometheus.Registerer) (rls.Transport, error) {
	tr := rls.Transport{MaxConnectionAge: t.age, MaxConnectionAgeGrace: t.grace, MaxConnectionIdle: t.idle,
		RequestTimeout: t.reqTimeout, WriteTimeout: t.writeTimeout, ResetRate: t.resetRate, ResetBurst: t.resetBurst}
	if t.cert == "" {
		return tr, nil
	}
	o := tlsreload.Options{CertFile: t.cert, KeyFile: t.key, ClientCAFile: t.clientCA, NextProtos: []string{"h2"}, Logger: log}
	if t.clientSAN != "" {
		o.ClientSANs = []string{t.clientSAN}
	}
	r, err := tlsreload.New(o)
	if err != nil {
		return tr, fmt.Errorf("rls: grpc %w", err)
	}
	if err := r.Register(reg, "grpc"); err != nil {
		return tr, fmt.Errorf("rls: %w", err)
	}
	tr.TLS = r.Config()
	return tr, nil
}

// leanOptions are h2grpc's options for tr; grpc-go's server is held to
// their stream limits and idleness by h2grpc.Guard.
func leanOptions(tr rls.Transport, log *slog.Logger) h2grpc.Options {
	// tr's zero is none; h2grpc's is its default, and none is negative.
	lim := h2grpc.StreamLimits{RequestTimeout: noneIfZero(tr.RequestTimeout), WriteTimeout: noneIfZero(tr.WriteTimeout),
		ResetRate: int(noneIfZero(int64(tr.ResetRate))), ResetBurst: max(tr.ResetBurst, 1)}
	return h2grpc.Options{Logger: log, TLS: tr.TLS, MaxConnectionAge: tr.MaxConnectionAge,
		MaxConnectionAgeGrace: tr.MaxConnectionAgeGrace, MaxConnectionIdle: tr.MaxConnectionIdle, StreamLimits: lim}
}

// noneIfZero turns a flag's zero (none) into h2grpc's none (negative).
func noneIfZero[T time.Duration | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
