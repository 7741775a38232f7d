package tlsreload_test

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/internal/server/tlsreload"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// A listener serving the certificate of two files, reloaded when they
// change.
func Example() {
	dir, _ := os.MkdirTemp("", "tlsreload")
	defer os.RemoveAll(dir)
	ca := testcerts.NewCA("example CA")
	pair := ca.Server("rls.example")
	certFile, keyFile, _ := pair.Write(dir, "tls")

	r, err := tlsreload.New(tlsreload.Options{CertFile: certFile, KeyFile: keyFile, NextProtos: []string{"h2"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, _ := tls.Listen("tcp", "127.0.0.1:0", r.Config())
	defer ln.Close()
	fmt.Println(r.Leaf().Subject.CommonName)

	// cert-manager renews it: the next handshake serves the new one.
	renewed := ca.Server("rls.example, renewed")
	renewed.Write(dir, "tls")
	r.Config().GetConfigForClient(nil)
	fmt.Println(r.Leaf().Subject.CommonName, r.Reloads())
	// Output:
	// rls.example
	// rls.example, renewed 1
}

func ExampleParseVersion() {
	v, _ := tlsreload.ParseVersion("TLSv1.3")
	fmt.Println(v == tls.VersionTLS13)
	// Output: true
}
