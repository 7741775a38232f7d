package gobuild

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuiltOnce: a binary in the cache is used as it is, and a build that
// failed is not tried again until its failed.txt is deleted (neither runs
// go).
func TestBuiltOnce(t *testing.T) {
	cache := t.TempDir()
	p := Program{Name: "tool", Module: "example.com/none", Version: "v0.0.1", Pkg: "cmd/tool"}
	bin := p.Path(cache)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	failed := filepath.Join(filepath.Dir(bin), "failed.txt")
	if err := os.WriteFile(failed, []byte("the proxy refused it"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := p.Build(t.Context(), cache, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "the proxy refused it") || !strings.Contains(err.Error(), failed) {
		t.Fatalf("Build after a failure: %v; want the failure again, naming %s", err, failed)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Build(t.Context(), cache, io.Discard); err != nil || got != bin {
		t.Fatalf("Build with the binary there = %q, %v; want %q", got, err, bin)
	}
}

// TestForbidden reads the module out of go's line for a module the Go
// module proxy refuses.
func TestForbidden(t *testing.T) {
	line := "pkg/middlewares/auth/basic_auth.go:13:2: github.com/containous/go-http-auth@v0.4.1-0.20260804094822-b975dcaa8c48: reading https://proxy.golang.org/github.com/containous/go-http-auth/@v/v0.4.1-0.20260804094822-b975dcaa8c48.zip: 403 Forbidden"
	m := forbidden.FindStringSubmatch(line)
	if m == nil || m[1] != "github.com/containous/go-http-auth@v0.4.1-0.20260804094822-b975dcaa8c48" {
		t.Fatalf("forbidden on %q = %q", line, m)
	}
	if forbidden.MatchString("go: downloading github.com/rs/zerolog v1.34.0") {
		t.Error("a download line matched")
	}
}

// TestNice: a build runs under nice -n 10 where nice is on PATH, so that
// minutes of compiling yield to the other work of a shared machine.
func TestNice(t *testing.T) {
	cmd := goCommand(t.Context(), "build", "./cmd/x")
	if _, err := exec.LookPath("nice"); err != nil {
		t.Skip("no nice on PATH")
	}
	if got := strings.Join(cmd.Args[1:], " "); filepath.Base(cmd.Path) != "nice" || got != "-n 10 go build ./cmd/x" {
		t.Fatalf("goCommand runs %s %s, want nice -n 10 go build ./cmd/x", cmd.Path, got)
	}
}
