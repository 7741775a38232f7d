package rls

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/rules"
)

// DefaultPollInterval is how often Watch looks at the directory when
// given no interval.
const DefaultPollInterval = time.Second

// Load reads every YAML file of dir (as rules.LoadDir) and swaps the
// configuration in. A bad directory (one that cannot be read, or a file in
// it that cannot be read, parsed or validated) is an error, logged once
// with every problem and counted once in config_load_error, and the
// previous configuration stays.
func (s *Server) Load(dir string) error {
	fp, _ := fingerprint(dir) // before reading: a later edit is seen by Watch
	s.loaded.Store(&loaded{dir: dir, fp: fp})
	set, err := rules.LoadDir(dir)
	if err != nil {
		s.m.configLoadError.Inc()
		s.log.Error("rls: config refused; keeping the previous one", slog.String("dir", dir), slog.Any("error", err))
		return err
	}
	s.SetRules(set)
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
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	var last [32]byte
	if l := s.loaded.Load(); l != nil && l.dir == dir {
		last = l.fp
	} else {
		last, _ = fingerprint(dir)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// A directory or file that cannot be read is a refused config
		// like any other: Load fails on it, and logs and counts it once
		// (its fingerprint is the error's, the same until it changes).
		fp, _ := fingerprint(dir)
		if fp == last {
			continue
		}
		last = fp
		_ = s.Load(dir) // logged and counted; the previous config stays on error
	}
}

// loaded is what the last Load read.
type loaded struct {
	dir string
	fp  [32]byte
}

// fingerprint hashes the names and contents of dir's YAML files, as
// rules.LoadDir selects them. Hashing contents, not mtimes, sees edits that
// keep the size and mtime, and ignores touches.
func fingerprint(dir string) ([32]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sha256.Sum256([]byte("error: " + err.Error())), err
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
	sort.Strings(names)
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
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			f.Close()
			continue
		}
		if _, err := io.Copy(h, f); err != nil {
			errs = append(errs, err)
		}
		f.Close()
		h.Write([]byte{0})
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, errors.Join(errs...)
}
