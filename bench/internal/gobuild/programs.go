package gobuild

import (
	"os"
	"path/filepath"
)

// Caddy is the Caddy server with its standard modules (reverse_proxy,
// forward_auth).
var Caddy = Program{Name: "caddy", Module: "github.com/caddyserver/caddy/v2", Version: "v2.11.9", Pkg: "cmd/caddy"}

// Gubernator is gubernator's server (gRPC V1.GetRateLimits, peers found
// by memberlist gossip). v2.13.0 is its newest release that builds with
// Go 1.26 (later ones require a newer go).
var Gubernator = Program{Name: "gubernator", Module: "github.com/gubernator-io/gubernator/v2", Version: "v2.13.0", Pkg: "cmd/gubernator"}

// Traefik is the Traefik proxy. Its go.mod replaces modules (forks, and
// github.com/traefik/traefik/dynamic/ext with a directory of the
// repository that the module's zip leaves out, being a module of its
// own), and its web UI is embedded from files built outside Go, so go
// install cannot build it: the source is completed with the two (an
// extension module whose types are empty, as in Traefik's repository, and
// an empty UI page: the benchmarks never open the dashboard) and built as
// the main module.
var Traefik = Program{Name: "traefik", Module: "github.com/traefik/traefik/v3", Version: "v3.7.13", Pkg: "cmd/traefik",
	Prepare: func(src string) error {
		ext := filepath.Join(src, "pkg", "config", "dynamic", "ext")
		if err := os.MkdirAll(ext, 0o755); err != nil {
			return err
		}
		files := map[string]string{
			filepath.Join(ext, "go.mod"): "module github.com/traefik/traefik/dynamic/ext\n\ngo 1.24.0\n",
			filepath.Join(ext, "ext.go"): "// Package ext holds the extension points of Traefik's dynamic configuration, empty.\npackage ext\n\n" +
				"// HTTP extends dynamic.HTTP.\ntype HTTP struct{}\n\n// Router extends dynamic.Router.\ntype Router struct{}\n",
			filepath.Join(src, "webui", "static", "index.html"): "<!doctype html><title>Traefik</title>\n",
		}
		if err := os.MkdirAll(filepath.Join(src, "webui", "static"), 0o755); err != nil {
			return err
		}
		for name, text := range files {
			if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
				return err
			}
		}
		return nil
	}}
