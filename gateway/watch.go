package gateway

import (
	"context"
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/server/watch"
)

// WatchFile polls filename every interval (1s when zero) until ctx is
// done, and calls changed when its content differs from what it was when
// WatchFile was called. A file that cannot be read is skipped until it
// can. WatchFile blocks; run it in a goroutine that ctx stops. A caller
// that loads the file before starting that goroutine should make a
// FileWatcher first instead, so that no change in between goes unseen.
func WatchFile(ctx context.Context, filename string, interval time.Duration, changed func()) {
	NewFileWatcher(filename).Run(ctx, interval, func([]string) { changed() })
}

// FileWatcher reports changes to the content of a set of files: the one
// watcher of both servers (internal/server/watch), which sluice rls uses for its
// rules directory.
type FileWatcher = watch.Watcher

// NewFileWatcher reads filenames now: Run reports changes from this
// content on. Make it before reading the files for use, and a change made
// in between is reported (once more than needed at worst, never missed).
func NewFileWatcher(filenames ...string) *FileWatcher { return watch.New(filenames...) }

// ConfigFiles returns the files cfg was loaded from, which a reload reads
// again: the config file itself, its rules_files, identity.api_keys_file
// and identity.jwt.key_file. A built-in config (Default) has none.
func ConfigFiles(cfg *Config) []string {
	if cfg == nil || cfg.readFile != nil {
		return nil
	}
	var files []string
	add := func(f string) {
		if f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	add(cfg.File)
	if cfg.Rules != nil {
		for _, d := range cfg.Rules.Domains() {
			add(cfg.Rules.Config(d).File)
		}
	}
	add(cfg.Identity.APIKeysFile)
	if cfg.Identity.JWT != nil {
		add(cfg.Identity.JWT.KeyFile)
	}
	return files
}

// Watch keeps g serving the latest good version of the config file
// filename until ctx is done. It reloads the file (as ReloadFile: a
// refused version is logged and counted once, and the previous config
// keeps serving) when w sees the content of a watched file change, polling
// every interval (1s when zero), and when reload receives a value, which
// is logged as the trigger (say "SIGHUP"); reload may be nil.
//
// The files watched follow the config: the config file and every file it
// reads (ConfigFiles), so that an API key removed from identity's
// api_keys_file stops working within one interval, without a signal. A
// refused config's files are watched too, so that creating a key file it
// names is enough to retry it.
//
// w must already watch the files of the config g serves, read before they
// were: make it with NewFileWatcher(filename) before parsing the file,
// and Set it to ConfigFiles(cfg) before New reads them. Watch blocks; run
// it in a goroutine that ctx stops.
func (g *Gateway) Watch(ctx context.Context, filename string, w *FileWatcher, interval time.Duration, reload <-chan string) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var trigger string
		var changed []string
		select {
		case <-ctx.Done():
			return
		case trigger = <-reload:
		case <-t.C:
			if changed = w.Poll(); len(changed) == 0 {
				continue
			}
			trigger = "file changed"
		}
		g.watchedReload(filename, w, trigger, changed)
	}
}

// watchedReload reloads filename and keeps w on the files of the config
// served and of the one tried.
func (g *Gateway) watchedReload(filename string, w *FileWatcher, trigger string, changed []string) {
	// Watch the files the new config names before the reload reads them,
	// so that a change made meanwhile is seen at the next poll. The file
	// is parsed twice for that: once to learn the names, once to reload.
	files := append([]string{filename}, ConfigFiles(g.Config())...)
	if cfg, err := ParseFile(filename); err == nil {
		files = append(files, ConfigFiles(cfg)...)
	}
	w.Set(files...)
	var attrs []any
	if len(changed) > 0 {
		attrs = []any{"changed", changed}
	}
	err := g.reload(filename, trigger, func() (*Config, error) { return ParseFile(filename) }, attrs...)
	if err == nil {
		// Forget the files only the previous config read.
		w.Set(append([]string{filename}, ConfigFiles(g.Config())...)...)
	}
}

// reload loads a config with load and swaps it in, one reload at a time.
// Every outcome is logged once and counted once in reloads, whatever
// refused the config (a file that cannot be read, a parse or validation
// error, an identity file that cannot be loaded). source names the config
// in the log and trigger, when not "", what asked for the reload.
func (g *Gateway) reload(source, trigger string, load func() (*Config, error), attrs ...any) error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	attrs = append([]any{"file", source}, attrs...)
	if trigger != "" {
		attrs = append(attrs, "trigger", trigger)
	}
	cfg, err := load()
	if err == nil {
		err = g.swap(cfg)
	}
	if err != nil {
		g.metrics.reloads.WithLabelValues("invalid").Inc()
		g.log.Error("gateway: config refused; the previous config keeps serving", append(attrs, "err", err)...)
		return err
	}
	g.metrics.reloads.WithLabelValues("ok").Inc()
	g.log.Info("gateway: config reloaded", attrs...)
	return nil
}

// restartConn is what of a listener's settings its server took at start:
// read_timeout and write_timeout follow reloads, the rest does not.
func restartConn(c ConnConfig) string {
	return fmt.Sprint(c.Max, c.IdleTimeout, c.ReadHeaderTimeout, c.MaxHeaderBytes)
}

// swap builds cfg and serves it. Settings that need a restart are logged
// and ignored.
func (g *Gateway) swap(cfg *Config) error {
	st, err := g.build(cfg)
	if err != nil {
		return err
	}
	old := g.cur.Load().cfg
	for _, c := range []struct{ name, old, new string }{
		{"listen", old.Listen, cfg.Listen},
		{"admin_listen", old.AdminListen, cfg.AdminListen},
		{"store", redact.URL(g.StoreURL(old)), redact.URL(g.StoreURL(cfg))},
		{"snapshot.file", old.SnapshotFile, cfg.SnapshotFile},
		{"snapshot.journal, snapshot.journal_interval", old.JournalFile() + " " + old.JournalEvery.String(), cfg.JournalFile() + " " + cfg.JournalEvery.String()},
		{"max_keys", fmt.Sprint(old.MaxKeys), fmt.Sprint(cfg.MaxKeys)},
		{"connections (max, idle_timeout, read_header_timeout, max_header_bytes)", restartConn(old.Connections), restartConn(cfg.Connections)},
		{"admin_connections", fmt.Sprint(old.AdminConnections), fmt.Sprint(cfg.AdminConnections)},
		{"tls", old.TLS.String(), cfg.TLS.String()},
		{"http2", old.HTTP2.String(), cfg.HTTP2.String()},
		{"proxy_protocol", old.ProxyProtocol.String(), cfg.ProxyProtocol.String()},
	} {
		if c.old != c.new {
			g.log.Warn("gateway: setting changed; it takes effect on restart", "setting", c.name, "serving", c.old, "file", c.new)
		}
	}
	closeUnused(g.cur.Swap(st).upstreams, st.upstreams)
	return nil
}
