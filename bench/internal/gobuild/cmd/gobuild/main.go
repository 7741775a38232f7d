// Command gobuild builds the programs the benchmarks measure sluice
// against from the Go module proxy into the user cache (package gobuild)
// and prints each binary's path: what the tests that need one ask for
// when it is not there.
//
//	cd bench && go run ./internal/gobuild/cmd/gobuild traefik
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/sluicehq/sluice/bench/internal/gobuild"
)

func main() {
	programs := map[string]gobuild.Program{}
	for _, p := range []gobuild.Program{gobuild.Caddy, gobuild.Traefik, gobuild.Gubernator} {
		programs[p.Name] = p
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gobuild caddy|traefik|gubernator ...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cache, err := gobuild.Cache()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobuild:", err)
		os.Exit(1)
	}
	for _, name := range os.Args[1:] {
		p, ok := programs[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "gobuild: unknown program %q (want caddy, traefik or gubernator)\n", name)
			os.Exit(2)
		}
		bin, err := p.Build(ctx, cache, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gobuild:", err)
			os.Exit(1)
		}
		fmt.Println(bin)
	}
}
