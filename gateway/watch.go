package gateway

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// WatchFile polls filename every interval (1s when zero) until ctx is
// done, and calls changed when its content differs from what it was when
// WatchFile was called. A file that cannot be read is skipped until it
// can. WatchFile blocks; run it in a goroutine that ctx stops. A caller
// that loads the file before starting that goroutine should make a
// FileWatcher first instead, so that no change in between goes unseen.
func WatchFile(ctx context.Context, filename string, interval time.Duration, changed func()) {
	NewFileWatcher(filename).Run(ctx, interval, changed)
}

// FileWatcher reports changes to a file's content since it was made.
type FileWatcher struct {
	filename string
	last     fileVersion
}

type fileVersion struct {
	mod  time.Time
	size int64
	sum  [32]byte
}

// NewFileWatcher reads filename now: Run reports changes from this
// content on. Make it before reading the file for use, and a change made
// in between is reported (once more than needed at worst, never missed).
func NewFileWatcher(filename string) *FileWatcher {
	w := &FileWatcher{filename: filename}
	w.last, _ = w.read()
	return w
}

func (w *FileWatcher) read() (fileVersion, bool) {
	fi, err := os.Stat(w.filename)
	if err != nil {
		return fileVersion{}, false
	}
	data, err := os.ReadFile(w.filename)
	if err != nil {
		return fileVersion{}, false
	}
	return fileVersion{fi.ModTime(), fi.Size(), sha256.Sum256(data)}, true
}

// Run polls the file every interval (1s when zero) until ctx is done, and
// calls changed when its content changes. Run blocks.
func (w *FileWatcher) Run(ctx context.Context, interval time.Duration, changed func()) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, ok := w.read()
		if !ok || v == w.last {
			continue
		}
		// Only the content matters; a touch alone does not reload.
		if v.sum != w.last.sum {
			w.last = v
			changed()
			continue
		}
		w.last = v
	}
}
