package testcerts_test

import (
	"crypto/tls"
	"fmt"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

func Example() {
	ca := testcerts.NewCA("test CA")
	server := ca.Server("server")
	client := ca.Client("envoy", nil, "spiffe://cluster.local/ns/envoy-gateway-system/sa/envoy")
	_, err := server.Leaf.Verify(x509Opts(ca))
	fmt.Println(server.Leaf.Subject.CommonName, err == nil, client.Leaf.URIs[0])
	_ = tls.Certificate{}
	// Output: server true spiffe://cluster.local/ns/envoy-gateway-system/sa/envoy
}
