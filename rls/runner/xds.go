package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rls/xds"
	"github.com/sluicehq/sluice/rules"
)

// rlsXDSFlags choose where sluice rls's rules come from: files (the
// default) or an xDS management server.
type rlsXDSFlags struct {
	configType, server, nodeID string
	cert, key, ca, san         string
	useTLS                     bool
	nodeMetadata, headers      string // as given: KEY=VALUE,... and NAME:VALUE,...
	maxMsgSize                 int
	client                     *xds.Client
}

func (x *rlsXDSFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&x.configType, "config-type", "file", "where the rules come from: file (--config-dir, reloaded on change) or xds (an xDS management server, --xds-server; envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW)")
	fs.StringVar(&x.server, "xds-server", "", "with --config-type xds, the management server's gRPC `ADDR`ess (CONFIG_GRPC_XDS_SERVER_URL)")
	fs.StringVar(&x.nodeID, "xds-node-id", xds.DefaultNodeID, "with --config-type xds, the node `ID` the management server keeps this instance's snapshot under (CONFIG_GRPC_XDS_NODE_ID)")
	fs.IntVar(&x.maxMsgSize, "xds-max-msg-size", xds.DefaultMaxMsgSize, "with --config-type xds, the most `BYTES` one response from the management server may hold; a larger one is refused and the rules in use stay (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES)")
	fs.StringVar(&x.cert, "xds-tls-cert", "", "PEM client certificate `FILE` presented to the management server (CONFIG_GRPC_XDS_CLIENT_TLS_CERT); with --xds-tls-key")
	fs.StringVar(&x.key, "xds-tls-key", "", "PEM private key `FILE` of --xds-tls-cert (CONFIG_GRPC_XDS_CLIENT_TLS_KEY)")
	fs.StringVar(&x.ca, "xds-tls-ca", "", "PEM CA bundle `FILE` the management server's certificate must chain to, else the system's (CONFIG_GRPC_XDS_SERVER_TLS_CACERT); any --xds-tls* flag connects with TLS")
	fs.StringVar(&x.san, "xds-tls-san", "", "the `NAME` (DNS or IP SAN) the management server's certificate must carry, instead of --xds-server's host (CONFIG_GRPC_XDS_SERVER_TLS_SAN)")
	fs.BoolVar(&x.useTLS, "xds-tls", false, "connect to the management server with TLS even without other --xds-tls-* flags (CONFIG_GRPC_XDS_SERVER_USE_TLS)")
	fs.StringVar(&x.nodeMetadata, "xds-node-metadata", "", "with --config-type xds, the node's metadata as `KEY=VALUE,...` (string values; CONFIG_GRPC_XDS_NODE_METADATA)")
	fs.StringVar(&x.headers, "xds-headers", "", "with --config-type xds, gRPC metadata sent on each stream to the management server, as `NAME:VALUE,...`; values are never logged (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS)")
}

// parseNodeMetadata reads KEY=VALUE,... as envoyproxy/ratelimit reads
// CONFIG_GRPC_XDS_NODE_METADATA (a value may hold '='), except that an
// entry without '=' is refused where upstream drops it silently, and so
// is a key given twice. Empty entries are skipped.
func parseNodeMetadata(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, entry := range strings.Split(s, ",") {
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: --xds-node-metadata: entry %q has no '=' (envoyproxy/ratelimit would drop it silently): want KEY=VALUE,...", ErrUsage, entry)
		case k == "":
			return nil, fmt.Errorf("%w: --xds-node-metadata: entry %q has no key", ErrUsage, entry)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%w: --xds-node-metadata: key %q given twice", ErrUsage, k)
		}
		m[k] = v
	}
	return m, nil
}

// parseHeaders reads NAME:VALUE,... as envoyproxy/ratelimit reads
// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS (envconfig's map syntax),
// except that a value may hold ':'. Values are never printed; the
// names are checked by xds.New.
func parseHeaders(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	m := map[string]string{}
	for i, entry := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("%w: --xds-headers: entry %d has no ':': want NAME:VALUE,...", ErrUsage, i+1)
		}
		m[name] = v
	}
	return m, nil
}

func (x *rlsXDSFlags) check(configDir string) error {
	// envoyproxy/ratelimit's CONFIG_TYPE spellings are taken too.
	switch strings.ToLower(x.configType) {
	case "file":
		x.configType = "file"
	case "xds", "grpc_xds_sotw":
		x.configType = "xds"
	}
	switch x.configType {
	case "file":
		if configDir == "" {
			return fmt.Errorf("%w: --config-dir is required (or --config-type xds)", ErrUsage)
		}
		for _, f := range []struct{ name, v string }{{"xds-server", x.server}, {"xds-node-metadata", x.nodeMetadata}, {"xds-headers", x.headers}} {
			if f.v != "" {
				return fmt.Errorf("%w: --%s needs --config-type xds", ErrUsage, f.name)
			}
		}
	case "xds":
		if x.server == "" {
			return fmt.Errorf("%w: --config-type xds needs --xds-server", ErrUsage)
		}
		if configDir != "" {
			return fmt.Errorf("%w: --config-dir and --config-type xds exclude each other", ErrUsage)
		}
		if x.maxMsgSize <= 0 {
			return fmt.Errorf("%w: --xds-max-msg-size %d: want a positive number of bytes", ErrUsage, x.maxMsgSize)
		}
		if (x.cert == "") != (x.key == "") {
			return fmt.Errorf("%w: --xds-tls-cert and --xds-tls-key go together", ErrUsage)
		}
		if _, err := parseNodeMetadata(x.nodeMetadata); err != nil {
			return err
		}
		if _, err := parseHeaders(x.headers); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: --config-type %q: want file or xds", ErrUsage, x.configType)
	}
	return nil
}

// initialRules is the rule set the server starts with: the directory's
// (which must load), or none until the management server sends some.
func (f *Config) initialRules() (*rules.Set, error) {
	if f.xds.configType == "xds" {
		return rules.NewSet()
	}
	set, err := rules.LoadDir(f.configDir)
	if err != nil {
		return nil, fmt.Errorf("rls: config: %w", err)
	}
	return set, nil
}

// startRules loads the directory through srv (so that the load is
// counted and Watch starts from it), or makes the xDS client.
func (f *Config) startRules(srv *rls.Server, log *slog.Logger) error {
	x := &f.xds
	if x.configType != "xds" {
		if err := srv.Load(f.configDir); err != nil {
			return fmt.Errorf("rls: config: %w", err)
		}
		return nil
	}
	o := xds.Options{Server: x.server, NodeID: x.nodeID, Logger: log, MaxMsgSize: x.maxMsgSize}
	o.NodeMetadata, _ = parseNodeMetadata(x.nodeMetadata) // checked by check
	o.Headers, _ = parseHeaders(x.headers)
	if x.useTLS || x.cert != "" || x.ca != "" || x.san != "" {
		cfg, err := x.tlsConfig()
		if err != nil {
			return err
		}
		o.TLS = cfg
	}
	c, err := xds.New(srv, o)
	if err != nil {
		return fmt.Errorf("rls: %w", err)
	}
	x.client = c
	return c.Register(srv.Registry())
}

// tlsConfig is the xDS client's TLS: the CA to verify the server with
// (else the system's) and the client certificate, if any.
func (x *rlsXDSFlags) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: x.san}
	if x.ca != "" {
		pem, err := os.ReadFile(x.ca)
		if err != nil {
			return nil, fmt.Errorf("rls: xds: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rls: xds: %s: no PEM certificate in it", x.ca)
		}
	}
	if x.cert != "" {
		pair, err := tls.LoadX509KeyPair(x.cert, x.key)
		if err != nil {
			return nil, fmt.Errorf("rls: xds: %s, %s: %w", x.cert, x.key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// watchRules follows the rules' source until ctx is done.
func (f *Config) watchRules(ctx context.Context, srv *rls.Server) {
	if f.xds.client != nil {
		f.xds.client.Run(ctx)
		return
	}
	srv.Watch(ctx, f.configDir, f.poll)
}
