package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/gateway"
)

func init() {
	checkGatewayConfig = gateway.Check
	register(command{
		name:    "serve",
		summary: "run the rate limiting gateway (a reverse proxy with per-identity limits)",
		run:     runServe,
	})
}

const serveSynopsis = "[--config FILE] [--listen ADDR] [--admin-listen ADDR]"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", serveSynopsis, stderr)
	configFile := fs.String("config", "", "gateway config `FILE` (YAML); without it, the built-in demo config (builtin:echo upstream, memory store, demo API key)")
	listen := fs.String("listen", "", "listen on `ADDR` (host:port), overriding the config's listen")
	adminListen := fs.String("admin-listen", "", "serve /metrics, /healthz and /readyz on `ADDR`, overriding the config's admin_listen")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	load := func() (*gateway.Config, error) {
		var cfg *gateway.Config
		var err error
		if *configFile == "" {
			cfg, err = gateway.Default()
		} else {
			cfg, err = gateway.ParseFile(*configFile)
		}
		if err != nil {
			return nil, err
		}
		if *listen != "" {
			cfg.Listen = *listen
		}
		if *adminListen != "" {
			cfg.AdminListen = *adminListen
		}
		return cfg, nil
	}
	var watcher *gateway.FileWatcher
	if *configFile != "" {
		// Before the first load: a change made while starting is seen.
		watcher = gateway.NewFileWatcher(*configFile)
	}
	cfg, err := load()
	if err != nil {
		return err
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
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	adm, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("serve: admin: %w", err)
	}
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	if *configFile != "" {
		var mu sync.Mutex
		reload := func(why string) {
			mu.Lock()
			defer mu.Unlock()
			cfg, err := load()
			if err == nil {
				err = g.Reload(cfg)
			}
			if err != nil {
				log.Error("sluice serve: config refused; the previous config keeps serving", "file", *configFile, "trigger", why, "err", err)
				return
			}
			log.Info("sluice serve: config reloaded", "file", *configFile, "trigger", why)
		}
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer signal.Stop(hup)
			for {
				select {
				case <-wctx.Done():
					return
				case <-hup:
					reload("SIGHUP")
				}
			}
		}()
		go func() {
			defer wg.Done()
			watcher.Run(wctx, 0, func() { reload("file changed") })
		}()
	}
	source := *configFile
	if source == "" {
		source = "built-in default"
	}
	log.Info("sluice serve: listening", "addr", ln.Addr().String(), "admin", adm.Addr().String(),
		"config", source, "upstream", cfg.Upstream, "store", redact(cfg.Store), "headers", cfg.Headers.String())
	err = g.Serve(ctx, ln, adm)
	log.Info("sluice serve: stopped")
	return err
}

// redact hides a store URL's password.
func redact(s string) string {
	return gateway.RedactURL(s)
}
