package rls

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/server/watch"
	"github.com/sluicehq/sluice/rules"
)

// DefaultPollInterval is how often Watch looks at the directory when
// given no interval.
const DefaultPollInterval = watch.DefaultInterval

// Load reads every YAML file of dir (as rules.LoadDir) and swaps the
// configuration in. A bad directory (one that cannot be read, or a file in
// it that cannot be read, parsed or validated, or rules the store refuses
// to bind) is an error, logged once
// with every problem and counted once in config_load_error, and the
// previous configuration stays.
func (s *Server) Load(dir string) error {
	fp, _ := watch.Fingerprint(dir) // before reading: a later edit is seen by Watch
	s.loaded.Store(&loaded{dir: dir, fp: fp})
	set, err := rules.LoadDir(dir)
	if err == nil {
		err = s.swap(set) // bound to the store, or refused with the previous config kept
	}
	if err != nil {
		s.m.configLoadError.Inc()
		s.log.Error("rls: config refused; keeping the previous one", slog.String("dir", dir), slog.Any("error", err))
		return err
	}
	s.m.configLoadSuccess.Inc()
	s.log.Info("rls: config loaded", slog.String("dir", dir), slog.Any("domains", set.Domains()))
	return nil
}

// Watch polls dir every interval (zero means DefaultPollInterval) and
// calls Load when the content of its YAML files changes (files added,
// removed or edited) from what the last Load of dir read, or, without one,
// from what Watch saw first. It returns when ctx is done, with nil. Run it
// in a goroutine you stop by cancelling ctx.
func (s *Server) Watch(ctx context.Context, dir string, interval time.Duration) error {
	w := watch.New()
	if l := s.loaded.Load(); l != nil && l.dir == dir {
		w.Seen(dir, l.fp)
	} else {
		w.Set(dir)
	}
	// A directory or file that cannot be read is a refused config like
	// any other: Load fails on it, and logs and counts it once (its
	// fingerprint includes the error, the same until it changes).
	w.Run(ctx, interval, func([]string) {
		_ = s.Load(dir) // logged and counted; the previous config stays on error
	})
	return nil
}

// loaded is what the last Load read.
type loaded struct {
	dir string
	fp  watch.Sum
}
