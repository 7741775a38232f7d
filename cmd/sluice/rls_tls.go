package main

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

// grpcTransportFlags are sluice rls's TLS and connection-age flags, the
// same on both gRPC servers.
type grpcTransportFlags struct {
	cert, key, clientCA, clientSAN string
	age, grace, idle               time.Duration
}

func (t *grpcTransportFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&t.cert, "grpc-tls-cert", "", "PEM certificate chain `FILE`: serve gRPC over TLS (ALPN h2) with it and --grpc-tls-key, both reloaded when they change")
	fs.StringVar(&t.key, "grpc-tls-key", "", "PEM private key `FILE` of --grpc-tls-cert")
	fs.StringVar(&t.clientCA, "grpc-tls-client-ca", "", "PEM CA bundle `FILE`: require gRPC clients to present a certificate it verifies (mTLS); reloaded when it changes")
	fs.StringVar(&t.clientSAN, "grpc-tls-client-san", "", "with --grpc-tls-client-ca, the subject alternative `NAME` (DNS, URI, IP or e-mail) a client certificate must carry")
	fs.DurationVar(&t.age, "max-connection-age", 24*time.Hour, "end each gRPC connection with GOAWAY after about this long (±10% jitter), so clients reconnect and spread over instances; 0: never")
	fs.DurationVar(&t.grace, "max-connection-age-grace", time.Hour, "after --max-connection-age, how long calls in flight have before the connection is closed; 0: as long as they take")
	fs.DurationVar(&t.idle, "max-connection-idle", 5*time.Minute, "end a gRPC connection with no call for this long (GOAWAY), freeing its --max-connections slot; 0: never")
}

func (t *grpcTransportFlags) check() error {
	switch {
	case (t.cert == "") != (t.key == ""):
		return fmt.Errorf("%w: --grpc-tls-cert and --grpc-tls-key go together", errUsage)
	case t.clientCA != "" && t.cert == "":
		return fmt.Errorf("%w: --grpc-tls-client-ca needs --grpc-tls-cert and --grpc-tls-key", errUsage)
	case t.clientSAN != "" && t.clientCA == "":
		return fmt.Errorf("%w: --grpc-tls-client-san needs --grpc-tls-client-ca", errUsage)
	case t.age < 0 || t.grace < 0 || t.idle < 0:
		return fmt.Errorf("%w: --max-connection-age, --max-connection-age-grace and --max-connection-idle cannot be negative", errUsage)
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
	tr := rls.Transport{MaxConnectionAge: t.age, MaxConnectionAgeGrace: t.grace, MaxConnectionIdle: t.idle}
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

// leanOptions are h2grpc's options for tr.
func leanOptions(tr rls.Transport, log *slog.Logger) h2grpc.Options {
	return h2grpc.Options{Logger: log, TLS: tr.TLS, MaxConnectionAge: tr.MaxConnectionAge,
		MaxConnectionAgeGrace: tr.MaxConnectionAgeGrace, MaxConnectionIdle: tr.MaxConnectionIdle}
}
