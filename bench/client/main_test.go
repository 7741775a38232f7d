package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCompare runs a small comparison: every client completes, sluice
// loses nothing and gets at most a fifth of the best peer's 429s. Timing
// is not asserted here (2 noisy cores); the figures in
// docs/bench-client.md come from `go run ./client`.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three clients against a throttling server")
	}
	cfg := Config{Scenario: "retry-after", N: 200, Rate: 100, Burst: 10, Concurrency: 16}
	rs, err := Compare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	Print(&out, cfg, rs)
	t.Log("\n" + out.String())
	if rs[0].Client != "sluice" || rs[0].Failed != 0 {
		t.Errorf("sluice lost %d of %d requests", rs[0].Failed, cfg.N)
	}
	best := rs[1].Code429
	for _, r := range rs[2:] {
		best = min(best, r.Code429)
	}
	if rs[0].Code429*5 > best {
		t.Errorf("sluice got %d 429s, more than a fifth of the best peer's %d", rs[0].Code429, best)
	}
	if !strings.Contains(out.String(), "go-retryablehttp") || !strings.Contains(out.String(), "failsafe-go") {
		t.Errorf("table lacks a peer:\n%s", out.String())
	}
}
