package rls_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestWatchCountsEveryRefusedConfig checks that Watch counts each refused
// version of the directory once in config_load_error and logs it once,
// whatever refused it: a parse error, a validation error, a file that
// cannot be read, or a directory that cannot be read. It used to log a
// read error without counting it.
func TestWatchCountsEveryRefusedConfig(t *testing.T) {
	t.Parallel()
	const good = "domain: test\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"
	dir := filepath.Join(t.TempDir(), "config")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(dir, 0o755))
	write := func(name, content string) { must(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)) }
	write("test.yaml", good)
	refused := []struct {
		name string
		make func()
	}{
		{"yaml syntax", func() { write("test.yaml", "domain: [\n") }},
		{"bad unit", func() { write("test.yaml", strings.Replace(good, "minute", "fortnight", 1)) }},
		{"unknown field", func() { write("test.yaml", good+"colour: blue\n") }},
		{"duplicate domain", func() { write("test.yaml", good); write("again.yml", good) }},
		{"unreadable file", func() {
			must(os.Remove(filepath.Join(dir, "again.yml")))
			must(os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "broken.yaml")))
		}},
		{"unreadable directory", func() { must(os.RemoveAll(dir)) }},
	}
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		set, err := rules.LoadDir(dir)
		must(err)
		store := memstore.New(memstore.Options{SweepInterval: -1})
		defer store.Close()
		srv, err := rls.New(store, set, rls.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		must(err)
		defer srv.Close()
		must(srv.Load(dir))
		first := srv.Rules()
		go srv.Watch(t.Context(), dir, time.Second)
		for i, r := range refused {
			r.make()
			// Three polls: one sees the change, the others must not
			// count it again.
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if got := metricValue(srv, "ratelimit_service_config_load_error"); got != float64(i+1) {
				t.Errorf("after %s: config_load_error = %v, want %d", r.name, got, i+1)
			}
			if got := strings.Count(logs.String(), "config refused"); got != i+1 {
				t.Errorf("after %s: %d config refused log lines, want %d", r.name, got, i+1)
			}
		}
		if srv.Rules() != first {
			t.Error("a refused config replaced the config")
		}
		// Back to a good directory: loaded, and counted as a success.
		must(os.Mkdir(dir, 0o755))
		write("test.yaml", strings.Replace(good, "3", "4", 1))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if srv.Rules() == first {
			t.Error("the good config was not loaded")
		}
		if got := metricValue(srv, "ratelimit_service_config_load_error"); got != float64(len(refused)) {
			t.Errorf("config_load_error = %v, want %d", got, len(refused))
		}
	})
}
