package abuse

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// startXDSRLSEnv runs the built binary as /bin/ratelimit with nothing but
// envoyproxy/ratelimit's environment env (and loopback listeners).
func startXDSRLSEnv(t *testing.T, env map[string]string) (*rlsProc, error) {
	t.Helper()
	for k, v := range map[string]string{"HOST": "127.0.0.1", "PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0", "CONFIG_TYPE": "GRPC_XDS_SOTW"} {
		t.Setenv(k, v)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	p, m, err := startProcAs(t, "sluice rls", rlsReady, "/bin/ratelimit")
	if err != nil {
		return nil, err
	}
	return &rlsProc{proc: p, grpc: m[1], http: "http://" + m[2]}, nil
}

// TestXDSNodeMetadataHeadersSAN: CONFIG_GRPC_XDS_NODE_METADATA and
// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS reach the management server
// (a token it asks for, say), the header's value never reaches the log,
// and CONFIG_GRPC_XDS_SERVER_TLS_SAN pins the name the server's
// certificate must carry: a server whose certificate names another
// service is never followed, whatever it would push.
func TestXDSNodeMetadataHeadersSAN(t *testing.T) {
	ca := testcerts.NewCA("xds")
	dir := t.TempDir()
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(dns string) *managementServer {
		cert := ca.ServerNamed("xds", dns) // no IP SAN: 127.0.0.1 alone does not verify
		ms := startManagementServerWith(t, false, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS()}})))
		ms.push(t, "sluice-san", "1", xdsConfig(3, 0))
		return ms
	}
	env := func(ms *managementServer, san string) map[string]string {
		return map[string]string{"CONFIG_GRPC_XDS_SERVER_URL": ms.addr, "CONFIG_GRPC_XDS_NODE_ID": "sluice-san",
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": caFile, "CONFIG_GRPC_XDS_SERVER_TLS_SAN": san,
			"CONFIG_GRPC_XDS_NODE_METADATA":             "cluster=eg,zone=eu-1",
			"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-xds-token:tok-Zq81,x-tenant:acme"}
	}

	t.Run("the SAN named", func(t *testing.T) {
		ms := serve("ratelimit-xds.control.svc")
		r, err := startXDSRLSEnv(t, env(ms, "ratelimit-xds.control.svc"))
		if err != nil {
			skipIfUnknown(t, err, "CONFIG_GRPC_XDS_SERVER_TLS_SAN")
		}
		r.waitVersion(t, "1")
		r.enforcesLimit(t, [2]string{"k1", "k1"}, 3)
		ms.mu.Lock()
		md, node := ms.headers[0], ms.nodes[0]
		ms.mu.Unlock()
		if got := md.Get("x-xds-token"); len(got) != 1 || got[0] != "tok-Zq81" || md.Get("x-tenant")[0] != "acme" {
			t.Errorf("stream headers %v, want x-xds-token and x-tenant", md)
		}
		f := node.GetMetadata().GetFields()
		if len(f) != 2 || f["cluster"].GetStringValue() != "eg" || f["zone"].GetStringValue() != "eu-1" {
			t.Errorf("node metadata %v, want cluster=eg, zone=eu-1", node.GetMetadata())
		}
		if strings.Contains(r.output(), "tok-Zq81") {
			t.Errorf("the header's value is in the log:\n%s", r.output())
		}
	})

	t.Run("another SAN", func(t *testing.T) {
		ms := serve("evil.control.svc")
		r, err := startXDSRLSEnv(t, env(ms, "ratelimit-xds.control.svc"))
		if err != nil {
			skipIfUnknown(t, err, "CONFIG_GRPC_XDS_SERVER_TLS_SAN")
		}
		eventually(t, time.Minute, func() error {
			if !strings.Contains(r.output(), "certificate is valid for evil.control.svc, not ratelimit-xds.control.svc") {
				return fmt.Errorf("no handshake refusal logged yet")
			}
			return nil
		})
		if strings.Contains(r.output(), "xds: config loaded") {
			t.Fatal("followed a management server whose certificate names another service")
		}
		ms.mu.Lock()
		defer ms.mu.Unlock()
		if len(ms.nodes) != 0 {
			t.Fatalf("the server with the wrong name got %d requests", len(ms.nodes))
		}
	})

	t.Run("bad values refused at start", func(t *testing.T) {
		ms := serve("ratelimit-xds.control.svc")
		for name, kv := range map[string][2]string{
			"metadata without =": {"CONFIG_GRPC_XDS_NODE_METADATA", "cluster:eg"},
			"header name":        {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x token:secret-Qx"},
			"header without :":   {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x-token=secret-Qx"},
		} {
			e := env(ms, "ratelimit-xds.control.svc")
			e[kv[0]] = kv[1]
			_, err := startXDSRLSEnv(t, e)
			if err == nil || strings.Contains(err.Error(), "secret-Qx") || !strings.Contains(err.Error(), "exited before it was ready") {
				t.Errorf("%s: %v; want a refusal at start that does not print the value", name, err)
			}
		}
	})
}
