package main

import (
	"context"
	"os"
)

// sluice check validates a rules file offline.
func Example_check() {
	err := run(context.Background(), []string{"check", "../../examples/envoy/config/edge.yaml"}, os.Stdout, os.Stderr)
	if err != nil {
		panic(err)
	}
	// Output:
	// ok  ../../examples/envoy/config/edge.yaml (rules: domain edge_proxy_per_ip, 3 rules)
}
