package watch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/server/watch"
)

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPoll(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	conf := filepath.Join(dir, "config")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, file, "a")
	write(t, filepath.Join(conf, "a.yaml"), "x")
	w := watch.New(file, conf)
	poll := func(want ...string) {
		t.Helper()
		if got := w.Poll(); !slices.Equal(got, want) {
			t.Errorf("Poll = %v, want %v", got, want)
		}
	}
	poll()
	// A touch (same content) is no change; an edit is one, once.
	write(t, file, "a")
	poll()
	write(t, file, "b")
	poll(file)
	poll()
	// A file that vanishes (being replaced) is no change; its return with
	// new content is.
	os.Remove(file)
	poll()
	write(t, file, "c")
	poll(file)
	// In a directory: a YAML file added, edited, removed; other files and
	// dot files do not count.
	write(t, filepath.Join(conf, "notes.txt"), "n")
	write(t, filepath.Join(conf, ".hidden.yaml"), "h")
	poll()
	write(t, filepath.Join(conf, "b.yml"), "y")
	poll(conf)
	os.Remove(filepath.Join(conf, "b.yml"))
	poll(conf)
	// A directory that cannot be read is one change, reported once.
	os.RemoveAll(conf)
	poll(conf)
	poll()
	// Set keeps what a path is compared with; Seen sets it.
	w.Set(file)
	if got := w.Files(); !slices.Equal(got, []string{file}) {
		t.Errorf("Files = %v", got)
	}
	w.Seen(file, watch.Sum{})
	poll(file)
}

func ExampleWatcher() {
	dir, _ := os.MkdirTemp("", "watch")
	defer os.RemoveAll(dir)
	keys := filepath.Join(dir, "keys.txt")
	os.WriteFile(keys, []byte("key-1\n"), 0o644)
	w := watch.New(keys) // before reading the file for use
	os.WriteFile(keys, []byte("key-2\n"), 0o644)
	fmt.Println(len(w.Poll()), len(w.Poll()))
	// Output: 1 0
}
