package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/server/gctune"
	"github.com/sluicehq/sluice/rls/runner"
)

const serveSynopsis = "[--config FILE] [--listen ADDR] [--admin-listen ADDR] [--store URL] [--watch-interval D]"

// serveFlags are sluice serve's flags.
type serveFlags struct {
	configFile, listen, adminListen, store string
	watchInterval                          time.Duration
	gc                                     gctune.Policy
	logs                                   *logFlags
	password                               *runner.StorePassword
}

// storeURL is the store the gateway opens: --store, else the config's,
// with the password of --store-password(-file) put in its URL; "" keeps
// the config's (no flag given), reload after reload.
func (f *serveFlags) storeURL(cfg *gateway.Config) (string, error) {
	store, err := f.password.Apply(cmp.Or(f.store, cfg.Store))
	if err != nil {
		return "", rlsUsage(err)
	}
	if store == cfg.Store {
		return "", nil
	}
	return store, nil
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	fs := newFlagSet("serve", serveSynopsis, stderr)
	// A proxy's live heap is small and each request allocates: without
	// a floor the collector runs tens of times a second under load.
	f := &serveFlags{gc: gctune.Policy{FloorMiB: gctune.DefaultBytes >> 20}}
	fs.StringVar(&f.configFile, "config", "", "gateway config `FILE` (YAML); without it, the built-in demo config (builtin:echo upstream, memory store, demo API key)")
	fs.StringVar(&f.listen, "listen", "", "listen on `ADDR` (host:port), overriding the config's listen")
	fs.StringVar(&f.adminListen, "admin-listen", "", "serve /metrics, /healthz and /readyz on `ADDR`, overriding the config's admin_listen")
	fs.StringVar(&f.store, "store", "", "where counters live, overriding the config's store: memory, or a redis://, rediss://, redis-cluster://, redis-sentinel:// or unix:// `URL` (its password apart with --store-password-file; ?layout=packed keeps the buckets' and windows' states in shared hashes, a fifth to a third of the memory: docs/redis.md)")
	password := runner.AddStorePasswordFlags(fs)
	fs.DurationVar(&f.watchInterval, "watch-interval", time.Second, "how often to look for changes to the config file and the files it reads (API keys, JWT key, rules_files)")
	f.gc.AddFlags(fs)
	f.logs = addLogFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if f.watchInterval <= 0 {
		return nil, fmt.Errorf("%w: --watch-interval %v is not positive", errUsage, f.watchInterval)
	}
	if err := f.gc.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	f.password = password
	return f, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log := f.logs.logger(stderr)
	defer f.gc.Apply()()
	cfg, watcher, err := loadServeConfig(f.configFile)
	if err != nil {
		return err
	}
	// The flags override the config's addresses without changing it, so
	// that a reload compares the file with the file.
	addr, adminAddr := cfg.Listen, cfg.AdminListen
	if f.listen != "" {
		addr = f.listen
	}
	if f.adminListen != "" {
		adminAddr = f.adminListen
	}
	store, err := f.storeURL(cfg)
	if err != nil {
		return err
	}
	g, err := gateway.New(ctx, cfg, gateway.Options{Logger: log, Store: store})
	if err != nil {
		return err
	}
	defer func() {
		if err := g.Close(); err != nil {
			log.Error("sluice serve: close", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	adm, err := net.Listen("tcp", adminAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("serve: admin: %w", err)
	}
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	if f.configFile != "" {
		watchServeConfig(wctx, &wg, g, f, watcher)
	}
	source := f.configFile
	if source == "" {
		source = "built-in default"
	}
	upstream := redact.URL(cfg.Upstream)
	if cfg.Decision.All() { // nothing is proxied: the proxy in front is answered
		upstream = "decision:" + cfg.Decision.Proxy.String()
	}
	attrs := []any{"addr", ln.Addr().String(), "admin", adm.Addr().String(), "config", source, "upstream", upstream}
	if len(cfg.Upstreams) > 0 {
		attrs = append(attrs, "upstreams", len(cfg.Upstreams))
	}
	log.Info("sluice serve: listening", append(attrs, "store", redact.URL(g.StoreURL(cfg)), "headers", cfg.Headers.String(), "tls", cfg.TLS != nil)...)
	err = g.Serve(ctx, ln, adm)
	log.Info("sluice serve: stopped")
	return err
}

// loadServeConfig reads the config file, or the built-in default without
// one; with a file, the watcher of it and the files it reads.
func loadServeConfig(configFile string) (*gateway.Config, *gateway.FileWatcher, error) {
	if configFile == "" {
		cfg, err := gateway.Default()
		return cfg, nil, err
	}
	// Before the first read: a change made while starting is seen.
	watcher := gateway.NewFileWatcher(configFile)
	cfg, err := gateway.ParseFile(configFile)
	if err != nil {
		return nil, nil, err
	}
	watcher.Set(gateway.ConfigFiles(cfg)...) // before New reads them
	return cfg, watcher, nil
}

// watchServeConfig reloads g's config on SIGHUP and when its files
// change, until ctx is done; wg counts its goroutines.
func watchServeConfig(ctx context.Context, wg *sync.WaitGroup, g *gateway.Gateway, f *serveFlags, watcher *gateway.FileWatcher) {
	// One path for every reload: the gateway's, which logs and counts
	// each outcome once and keeps watching the files the config reads.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan string)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case reload <- "SIGHUP":
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		g.Watch(ctx, f.configFile, watcher, f.watchInterval, reload)
	}()
}
