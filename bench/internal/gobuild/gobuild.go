// Package gobuild builds the Go programs a benchmark measures sluice
// against (Caddy, Traefik) from the Go module proxy, once, into the user's
// cache directory, and reuses the binary after: nothing of theirs is
// checked in, and their dependencies stay out of every go.mod here.
package gobuild

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Program is a command of a module on the Go module proxy, at a version.
type Program struct {
	Name    string // the binary's name: caddy
	Module  string // github.com/caddyserver/caddy/v2
	Version string // v2.11.9
	Pkg     string // the command's directory in the module: cmd/caddy
	// Prepare, when set, is for a module that go install cannot build
	// (its go.mod has replace directives, or its zip lacks files the
	// command needs): its source is copied into the cache, Prepare
	// completes it, and go build runs there as the main module.
	Prepare func(src string) error
	// Ldflags, when set, are go build's -ldflags for a Prepare build (the
	// version the binary reports).
	Ldflags string
}

// Cache returns the directory programs are kept in:
// $XDG_CACHE_HOME/sluice-bench, or ~/.cache/sluice-bench.
func Cache() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "sluice-bench"), nil
}

// Path returns where the binary is kept under cache.
func (p Program) Path(cache string) string {
	return filepath.Join(cache, p.Name+"-"+p.Version, p.Name)
}

// Build returns the binary under cache, building it first when it is not
// there (minutes, the first time), saying so on progress with go's own
// output and a line every 30 s while it runs.
func (p Program) Build(ctx context.Context, cache string, progress io.Writer) (string, error) {
	bin := p.Path(cache)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	failed := filepath.Join(dir, "failed.txt")
	if b, err := os.ReadFile(failed); err == nil {
		return "", fmt.Errorf("build %s %s failed before (delete %s to try again): %s", p.Module, p.Version, failed, b)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "building %s %s from the Go module proxy into %s (minutes the first time) …\n", p.Module, p.Version, dir)
	start := time.Now()
	tmp := bin + ".build"
	var cmd *exec.Cmd
	if p.Prepare == nil {
		cmd = goCommand(ctx, "install", p.Module+"/"+p.Pkg+"@"+p.Version)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
		cmd.Dir = dir
	} else {
		src, err := p.source(ctx, dir)
		if err != nil {
			return "", err
		}
		cmd = goCommand(ctx, "build", "-ldflags="+p.Ldflags, "-o", filepath.Join(tmp, p.Name), "./"+p.Pkg)
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		cmd.Dir = src
	}
	if err := run(cmd, p.Name, progress, start); err != nil {
		if ctx.Err() == nil {
			os.WriteFile(failed, []byte(err.Error()), 0o644)
		}
		return "", fmt.Errorf("build %s %s: %w", p.Module, p.Version, err)
	}
	if err := os.Rename(filepath.Join(tmp, p.Name), bin); err != nil {
		return "", err
	}
	os.RemoveAll(tmp)
	fmt.Fprintf(progress, "built %s in %v\n", bin, time.Since(start).Round(time.Second))
	return bin, nil
}

// goCommand is go with args, under nice -n 10 where nice is on PATH:
// a build of minutes on a shared machine yields to what else runs there.
func goCommand(ctx context.Context, args ...string) *exec.Cmd {
	if nice, err := exec.LookPath("nice"); err == nil {
		return exec.CommandContext(ctx, nice, append([]string{"-n", "10", "go"}, args...)...)
	}
	return exec.CommandContext(ctx, "go", args...)
}

// source downloads the module (go mod download) and copies it to
// dir/src, writable, for Prepare.
func (p Program) source(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", p.Module+"@"+p.Version).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v: %s", p.Module, p.Version, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s", p.Module, p.Version, err, m.Error)
	}
	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.CopyFS(src, os.DirFS(m.Dir)); err != nil {
		return "", fmt.Errorf("copy %s: %w", m.Dir, err)
	}
	if err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	}); err != nil {
		return "", err
	}
	if err := p.Prepare(src); err != nil {
		return "", fmt.Errorf("prepare %s: %w", p.Module, err)
	}
	return src, nil
}

// forbidden matches go's line for a module the proxy refuses to serve.
var forbidden = regexp.MustCompile(`: (\S+@\S+): reading https?://\S+: 403 Forbidden`)

// run runs cmd, copying its output to progress line by line (go's
// "downloading" lines, and errors) and saying every 30 s that it still
// runs.
func run(cmd *exec.Cmd, name string, progress io.Writer, start time.Time) error {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	var tail, refused []string
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintf(progress, "  %s: %s\n", name, sc.Text())
			if m := forbidden.FindStringSubmatch(sc.Text()); m != nil && !slices.Contains(refused, m[1]) {
				refused = append(refused, m[1])
			}
			tail = append(tail, sc.Text())
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			<-lines
			if err != nil {
				if len(refused) > 0 {
					return fmt.Errorf("%v: the Go module proxy refuses %d of its dependencies (403 Forbidden, \"not available\"): %s",
						err, len(refused), strings.Join(refused, ", "))
				}
				return fmt.Errorf("%v: %s", err, strings.Join(tail, "\n"))
			}
			return nil
		case <-tick.C:
			fmt.Fprintf(progress, "  %s: still building (%v)\n", name, time.Since(start).Round(time.Second))
		}
	}
}
