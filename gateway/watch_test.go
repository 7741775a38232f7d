package gateway_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

func TestWatchFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	must(t, os.WriteFile(file, []byte("a"), 0o644))
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		go gateway.WatchFile(t.Context(), file, time.Second, func() { n.Add(1) })
		step := func(want int32) {
			t.Helper()
			time.Sleep(1500 * time.Millisecond)
			synctest.Wait()
			if got := n.Load(); got != want {
				t.Errorf("changes seen = %d, want %d", got, want)
			}
		}
		step(0)
		must(t, os.WriteFile(file, []byte("b"), 0o644))
		step(1)
		// Same content, new modification time: no reload.
		must(t, os.Chtimes(file, time.Now(), time.Now().Add(time.Hour)))
		step(1)
		// A missing file is skipped until it is back.
		must(t, os.Remove(file))
		step(1)
		must(t, os.WriteFile(file, []byte("c"), 0o644))
		step(2)
	})
}

// TestFileWatcherBaseline checks that a FileWatcher reports a change made
// after it was made but before Run started (the window in which a server
// loads its config and starts its listeners).
func TestFileWatcherBaseline(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	must(t, os.WriteFile(file, []byte("a"), 0o644))
	synctest.Test(t, func(t *testing.T) {
		w := gateway.NewFileWatcher(file)
		must(t, os.WriteFile(file, []byte("b"), 0o644)) // before Run
		var n atomic.Int32
		go w.Run(t.Context(), time.Second, func() { n.Add(1) })
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Errorf("changes seen = %d, want 1 (the one made before Run)", got)
		}
	})
}
