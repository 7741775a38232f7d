package testcerts_test

import (
	"crypto/x509"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

func x509Opts(ca *testcerts.CA) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost"}
}
