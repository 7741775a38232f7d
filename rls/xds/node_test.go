package xds_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rls/xds"
)

// TestNodeMetadataAndHeaders: the node metadata and the stream headers
// reach the management server, as envoyproxy/ratelimit sends
// CONFIG_GRPC_XDS_NODE_METADATA and CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS.
func TestNodeMetadataAndHeaders(t *testing.T) {
	cp := startControlPlane(t)
	srv, _ := rlsOver(t)
	client := runClient(t, srv, xds.Options{Server: cp.addr, NodeID: "meta",
		NodeMetadata: map[string]string{"cluster": "eg", "zone": "a=b"},
		Headers:      map[string]string{"X-Token": "s3cret", "x-tenant": "t1", "trace-bin": "\x00\xff"}})
	cp.push(t, "meta", "1", limitConfig("a", "a", "x", 1))
	waitFor(t, "version 1", func() bool { return client.Status().Version == "1" })

	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.headers) == 0 || len(cp.nodes) == 0 {
		t.Fatalf("%d streams, %d nodes seen", len(cp.headers), len(cp.nodes))
	}
	md := cp.headers[0]
	for k, want := range map[string]string{"x-token": "s3cret", "x-tenant": "t1", "trace-bin": "\x00\xff"} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	n := cp.nodes[0]
	f := n.GetMetadata().GetFields()
	if n.GetId() != "meta" || len(f) != 2 || f["cluster"].GetStringValue() != "eg" || f["zone"].GetStringValue() != "a=b" {
		t.Fatalf("node %v, want id meta with cluster=eg and zone=a=b", n)
	}
}

// TestHeadersRefused: a header gRPC would refuse to send is refused at
// New, naming it and never printing its value.
func TestHeadersRefused(t *testing.T) {
	for name, h := range map[string]map[string]string{
		"space in name":  {"x token": "v"},
		"colon":          {":authority": "v"},
		"empty name":     {"": "v"},
		"grpc reserved":  {"grpc-timeout": "1S"},
		"control char":   {"x-token": "sec\nret"},
		"non-ASCII":      {"x-token": "sécret"},
		"twice, by case": {"X-Token": "secret1", "x-token": "secret2"},
	} {
		_, err := xds.New(nil, xds.Options{Server: "127.0.0.1:1", Headers: h})
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "ret") && !strings.Contains(name, "name") {
			t.Errorf("%s: the error prints the value: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}
