package proxies

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/internal/gobuild"
)

// traefikBinary returns Traefik (gobuild.Traefik) from the user cache,
// building it there when the test has the time for that (half an hour:
// go test -timeout 40m); it skips, saying why, when the binary is
// absent and cannot be built.
func traefikBinary(t *testing.T) string {
	t.Helper()
	p := gobuild.Traefik
	cache, err := gobuild.Cache()
	if err != nil {
		t.Skip(err)
	}
	bin := p.Path(cache)
	if _, err := os.Stat(bin); err != nil {
		if deadline, ok := t.Deadline(); ok && time.Until(deadline) < 30*time.Minute {
			t.Skipf("Traefik %s is not built (%s): build it with `cd bench && go run ./internal/gobuild/cmd/gobuild traefik` (about 15 minutes), or give this test -timeout 40m", p.Version, bin)
		}
		if bin, err = p.Build(t.Context(), cache, t.Output()); err != nil {
			t.Skipf("Traefik %s did not build: %v", p.Version, err)
		}
	}
	return bin
}

// TestTraefik: two real Traefik servers, each with examples/proxies/
// traefik.yaml and traefik-dynamic.yaml (ForwardAuth) in front of one
// upstream and asking its own `sluice serve` (examples/proxies/sluice.yaml
// with decision.proxy: forwarded), both sluices on one real Redis: the
// checks of checkOneBudget.
func TestTraefik(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Traefik, builds sluice, starts redis-server")
	}
	traefik := traefikBinary(t)
	d := startDeciders(t, 2)
	var fronts []string
	for i, sl := range d.sluices {
		addr := freeAddr(t)
		dyn := filepath.Join(d.dir, fmt.Sprintf("traefik-dynamic-%d.yaml", i))
		static := filepath.Join(d.dir, fmt.Sprintf("traefik-%d.yaml", i))
		files := map[string]string{
			dyn: example(t, "traefik-dynamic.yaml", "http://127.0.0.1:8181/auth", "http://"+sl+"/auth", "http://127.0.0.1:3000", d.upstream),
			static: example(t, "traefik.yaml", `address: ":8000"`, `address: "`+addr+`"`, "filename: traefik-dynamic.yaml", "filename: "+dyn) +
				"global: {checkNewVersion: false, sendAnonymousUsage: false}\n",
		}
		for f, text := range files {
			if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run(t, nil, traefik, "--configFile="+static)
		waitListen(t, addr)
		waitRouted(t, "http://"+addr+"/")
		fronts = append(fronts, "http://"+addr)
	}
	checkOneBudget(t, "Traefik "+gobuild.Traefik.Version, fronts, d.up)
}

// waitRouted waits (a minute at most) until url answers 200: Traefik
// listens before its file provider's routers are loaded, and answers 404
// until then.
func waitRouted(t *testing.T, url string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	last := ""
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := c.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			return
		}
		last = res.Status
	}
	t.Fatalf("%s did not answer 200 within a minute (last: %s)", url, last)
}
