package abuse

import (
	"net/http"
	"testing"
)

// Bound: sluice serve keeps a heap floor (internal/server/heapfloor,
// 16 MiB) so that its collector does not run tens of times a second over
// a live heap of a few MiB: under load the heap goal is at least twice
// the floor, while the floor itself, never written, stays out of the
// resident set (a server just started is within half the floor of one
// without it). An operator who sets GOGC keeps the runtime's own goal:
// no floor; so does --heap-floor-mib 0.
func TestHeapFloor(t *testing.T) {
	const floor = 16 << 20
	cfg := writeFile(t, t.TempDir(), "gateway.yaml", perIPGateway("builtin:echo", "", "token_bucket", 1000000))
	g := startServe(t, cfg)
	t.Setenv("GOGC", "100") // the operator's: no floor
	plain := startServe(t, cfg)
	rss, rssPlain := g.rss(t), plain.rss(t)
	if rss-rssPlain > floor/2 {
		t.Errorf("resident set %d B at start with the floor, %d B without: the floor is resident", rss, rssPlain)
	}
	goal := func(g *gatewayProc) float64 {
		c := client(t)
		for i := range 2000 {
			if code, _, body := do(t, c, "GET", g.url+"/"); code != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, code, body)
			}
		}
		return scrape(t, g.admin).series["go_memstats_next_gc_bytes"]
	}
	if n := goal(g); n < 2*floor {
		t.Errorf("heap goal %.0f B after 2000 requests, want at least twice the %d B floor", n, floor)
	}
	if n := goal(plain); n >= floor {
		t.Errorf("GOGC=100: heap goal %.0f B after 2000 requests, want the runtime's own (below the %d B floor)", n, floor)
	}
	t.Setenv("GOGC", "")
	if n := goal(startServe(t, cfg, "--heap-floor-mib", "0")); n >= floor {
		t.Errorf("--heap-floor-mib 0: heap goal %.0f B after 2000 requests, want the runtime's own (below the %d B floor)", n, floor)
	}
}
