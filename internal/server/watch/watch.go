package watch

import (
	"context"
	"crypto/sha256"
	"errors"
	"github.com/sluicehq/sluice/internal/tick"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is Run's interval when given none.
const DefaultInterval = time.Second

// Sum is a path's fingerprint.
type Sum [32]byte

// Fingerprint returns path's fingerprint: a file's content, or a
// directory's YAML files. ok is false when path cannot be read; sum is
// then that of the error.
func Fingerprint(path string) (sum Sum, ok bool) {
	fi, err := os.Stat(path)
	if err == nil && fi.IsDir() {
		return dirSum(path), true
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return sha256.Sum256([]byte("error: " + err.Error())), false
	}
	return sha256.Sum256(data), true
}

// isDir reports whether path is a directory now.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// dirSum hashes the names and contents of dir's YAML files; an error is
// part of the hash.
func dirSum(dir string) Sum {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sha256.Sum256([]byte("error: " + err.Error()))
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		if ext := filepath.Ext(n); ext == ".yaml" || ext == ".yml" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	h := sha256.New()
	var errs []error
	for _, n := range names {
		io.WriteString(h, n)
		h.Write([]byte{0})
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st, err := f.Stat(); err == nil && st.IsDir() {
			f.Close()
			continue
		}
		if _, err := io.Copy(h, f); err != nil {
			errs = append(errs, err)
		}
		f.Close()
		h.Write([]byte{0})
	}
	if err := errors.Join(errs...); err != nil {
		io.WriteString(h, "error: "+err.Error())
	}
	var sum Sum
	copy(sum[:], h.Sum(nil))
	return sum
}

// Watcher reports changes to the content of a set of paths. Each is
// compared with its content when it joined the set (or the Sum given to
// Seen), then with what the watcher last saw. It is safe for concurrent
// use.
type Watcher struct {
	mu    sync.Mutex
	paths map[string]entry
}

type entry struct {
	sum Sum  // a zero Sum: not read yet
	dir bool // a directory when it joined: unreadable is a change then
}

// New reads paths now: Run reports changes from this content on. Make it
// before reading the paths for use, and a change made in between is
// reported (once more than needed at worst, never missed).
func New(paths ...string) *Watcher {
	w := &Watcher{paths: map[string]entry{}}
	w.Set(paths...)
	return w
}

// Set makes paths the ones w watches. A path it already watched keeps
// the content it is compared with; a new one is read now; one left out is
// no longer watched.
func (w *Watcher) Set(paths ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := make(map[string]entry, len(paths))
	for _, p := range paths {
		e, ok := w.paths[p]
		if !ok {
			e.sum, ok = Fingerprint(p)
			if !ok {
				e.sum = Sum{}
			}
			e.dir = isDir(p)
		}
		next[p] = e
	}
	w.paths = next
}

// Seen sets what path is compared with (adding it when absent): the
// fingerprint taken when its content was last read for use.
func (w *Watcher) Seen(path string, s Sum) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paths[path] = entry{sum: s, dir: isDir(path)}
}

// Files returns the paths w watches, sorted.
func (w *Watcher) Files() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.paths))
	for p := range w.paths {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Poll reads every path and returns, sorted, those whose content changed
// since last seen.
func (w *Watcher) Poll() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var changed []string
	for p, last := range w.paths {
		s, ok := Fingerprint(p)
		if (!ok && !last.dir) || s == last.sum {
			continue
		}
		changed = append(changed, p)
		last.sum = s
		w.paths[p] = last
	}
	slices.Sort(changed)
	return changed
}

// Run polls every interval (DefaultInterval when zero) until ctx is done,
// and calls changed once per poll in which one or more paths changed,
// with those paths. Run blocks; changed may call Set.
func (w *Watcher) Run(ctx context.Context, interval time.Duration, changed func(paths []string)) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick.Loop(ctx.Done(), interval, func(time.Time) {
		if ps := w.Poll(); len(ps) > 0 {
			changed(ps)
		}
	})
}
