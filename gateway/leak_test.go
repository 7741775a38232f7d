package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// Close stops every goroutine the gateway started (the snapshot loop, the
// memory store's sweeper): synctest fails a bubble whose goroutines
// outlive it.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "keys.txt"), []byte(testKeys), 0o644))
	file := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(file, []byte(strings.Replace(baseConfig, "upstream: builtin:echo", "upstream: builtin:echo\nsnapshot: {file: state.snap, interval: 1s}", 1)), 0o644))
	synctest.Test(t, func(t *testing.T) {
		cfg, err := gateway.ParseFile(file)
		must(t, err)
		g, err := gateway.New(t.Context(), cfg, gateway.Options{})
		must(t, err)
		time.Sleep(3500 * time.Millisecond) // three periodic snapshots
		must(t, g.Close())
	})
	if _, err := os.Stat(filepath.Join(dir, "state.snap")); err != nil {
		t.Errorf("no snapshot: %v", err)
	}
}
