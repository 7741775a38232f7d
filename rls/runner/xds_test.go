package runner

import (
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
)

// TestXDSFlags: --xds-node-metadata and --xds-headers read as upstream
// reads CONFIG_GRPC_XDS_NODE_METADATA and _CLIENT_ADDITIONAL_HEADERS;
// what upstream would drop silently or cannot mean is a usage error,
// which never prints a header's value.
func TestXDSFlags(t *testing.T) {
	xdsArgs := []string{"--config-type", "xds", "--xds-server", "127.0.0.1:1"}
	f, err := parseRLSFlags(append(xdsArgs, "--xds-node-metadata", "a=1,b=x=y,,c=", "--xds-headers", "X-Token:Bearer a:b,x-tenant:acme",
		"--xds-tls-san", "xds.internal"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := parseNodeMetadata(f.xds.nodeMetadata)
	if want := map[string]string{"a": "1", "b": "x=y", "c": ""}; !maps.Equal(md, want) {
		t.Errorf("node metadata %v, want %v", md, want)
	}
	h, _ := parseHeaders(f.xds.headers)
	if want := map[string]string{"X-Token": "Bearer a:b", "x-tenant": "acme"}; !maps.Equal(h, want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	cfg, err := f.xds.tlsConfig()
	if err != nil || cfg.ServerName != "xds.internal" {
		t.Errorf("TLS %v, %v: want ServerName xds.internal", cfg, err)
	}
	for _, args := range [][]string{
		append(xdsArgs, "--xds-node-metadata", "cluster:eg"),
		append(xdsArgs, "--xds-node-metadata", "=v"),
		append(xdsArgs, "--xds-node-metadata", "a=1,a=2"),
		append(xdsArgs, "--xds-headers", "x-token=secret-Qx"),
		append(xdsArgs, "--xds-headers", "x-token:secret-Qx,"),
		{"--config-dir", ".", "--xds-headers", "x-token:secret-Qx"},
		{"--config-dir", ".", "--xds-node-metadata", "a=1"},
	} {
		_, err := parseRLSFlags(args, io.Discard)
		if !errors.Is(err, ErrUsage) || strings.Contains(err.Error(), "secret-Qx") {
			t.Errorf("%q: %v; want a usage error without the value", args, err)
		}
	}
}
