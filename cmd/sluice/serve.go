package main

import (
	"context"
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

const serveSynopsis = "[--config FILE] [--listen ADDR] [--admin-listen ADDR] [--watch-interval D]"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", serveSynopsis, stderr)
	configFile := fs.String("config", "", "gateway config `FILE` (YAML); without it, the built-in demo config (builtin:echo upstream, memory store, demo API key)")
	listen := fs.String("listen", "", "listen on `ADDR` (host:port), overriding the config's listen")
	adminListen := fs.String("admin-listen", "", "serve /metrics, /healthz and /readyz on `ADDR`, overriding the config's admin_listen")
	watchInterval := fs.Duration("watch-interval", time.Second, "how often to look for changes to the config file and the files it reads (API keys, JWT key, rules_files)")
	logs := addLogFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *watchInterval <= 0 {
		return fmt.Errorf("%w: --watch-interval %v is not positive", errUsage, *watchInterval)
	}
	log := logs.logger(stderr)

	var watcher *gateway.FileWatcher
	var cfg *gateway.Config
	var err error
	if *configFile == "" {
		cfg, err = gateway.Default()
	} else {
		// Before the first read: a change made while starting is seen.
		watcher = gateway.NewFileWatcher(*configFile)
		cfg, err = gateway.ParseFile(*configFile)
		if err == nil {
			watcher.Set(gateway.ConfigFiles(cfg)...) // before New reads them
		}
	}
	if err != nil {
		return err
	}
	// The flags override the config's addresses without changing it, so
	// that a reload compares the file with the file.
	addr, adminAddr := cfg.Listen, cfg.AdminListen
	if *listen != "" {
		addr = *listen
	}
	if *adminListen != "" {
		adminAddr = *adminListen
	}
	g, err := gateway.New(ctx, cfg, gateway.Options{Logger: log})
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
	if *configFile != "" {
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
				case <-wctx.Done():
					return
				case <-hup:
					select {
					case reload <- "SIGHUP":
					case <-wctx.Done():
						return
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			g.Watch(wctx, *configFile, watcher, *watchInterval, reload)
		}()
	}
	source := *configFile
	if source == "" {
		source = "built-in default"
	}
	log.Info("sluice serve: listening", "addr", ln.Addr().String(), "admin", adm.Addr().String(),
		"config", source, "upstream", redact.URL(cfg.Upstream), "store", redact.URL(cfg.Store), "headers", cfg.Headers.String(), "tls", cfg.TLS != nil)
	err = g.Serve(ctx, ln, adm)
	log.Info("sluice serve: stopped")
	return err
}
