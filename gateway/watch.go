package gateway

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// WatchFile polls filename every interval (1s when zero) until ctx is
// done, and calls changed when its modification time or content changes.
// A file that cannot be read is skipped until it can. WatchFile blocks;
// run it in a goroutine that ctx stops.
func WatchFile(ctx context.Context, filename string, interval time.Duration, changed func()) {
	if interval <= 0 {
		interval = time.Second
	}
	type version struct {
		mod  time.Time
		size int64
		sum  [32]byte
	}
	read := func() (version, bool) {
		fi, err := os.Stat(filename)
		if err != nil {
			return version{}, false
		}
		data, err := os.ReadFile(filename)
		if err != nil {
			return version{}, false
		}
		return version{fi.ModTime(), fi.Size(), sha256.Sum256(data)}, true
	}
	last, _ := read()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, ok := read()
		if !ok || v == last {
			continue
		}
		// Only the content matters; a touch alone does not reload.
		if v.sum != last.sum {
			last = v
			changed()
			continue
		}
		last = v
	}
}
