package proxies

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaddy: two real Caddy servers, each with examples/proxies/Caddyfile
// in front of one upstream and asking its own `sluice serve`
// (examples/proxies/sluice.yaml with decision.proxy: forwarded), both
// sluices on one real Redis: the checks of checkOneBudget.
func TestCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy and sluice, starts redis-server")
	}
	bin := t.TempDir()
	caddy := build(t, ".", bin, "caddy", "./caddy")
	d := startDeciders(t, 2)
	var fronts []string
	for i, sl := range d.sluices {
		addr := freeAddr(t)
		file := filepath.Join(d.dir, fmt.Sprintf("Caddyfile-%d", i))
		if err := os.WriteFile(file, []byte(example(t, "Caddyfile", "127.0.0.1:8181", sl,
			"127.0.0.1:3000", strings.TrimPrefix(d.upstream, "http://"), ":8000 {", "http://"+addr+" {")), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, nil, caddy, "run", "--config", file, "--adapter", "caddyfile")
		waitListen(t, addr)
		fronts = append(fronts, "http://"+addr)
	}
	checkOneBudget(t, "Caddy", fronts, d.up)
}
