// Package nginxtest starts a real nginx for tests: one process (no
// daemon, no master) in a temporary directory, with the given http-level
// configuration, stopped when the test ends. When nginx is not installed
// the test is skipped, except under CI=true, where it fails: CI must not
// pass by skipping (scripts/test installs Debian's nginx).
package nginxtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Binary returns the nginx program, or skips tb (fails it under CI=true).
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			return "/usr/sbin/nginx"
		}
		if os.Getenv("CI") == "true" {
			tb.Fatalf("nginx not found (required under CI=true; scripts/test installs it): %v", err)
		}
		tb.Skip("nginx not installed")
	}
	return bin
}

// FreeAddr returns a loopback address ("127.0.0.1:port") with a port the
// kernel just gave out, for a server to listen on.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start runs nginx with http as the contents of its http block and waits
// until addr (one of its listen addresses) accepts connections. It
// returns the directory nginx runs in (its error log is logs/error.log).
func Start(tb testing.TB, addr, http string) string {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	for _, d := range []string{"tmp", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log warn;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path %[1]s/tmp/body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
%[2]s
}
`, dir, http)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "logs", "error.log"))
	out := &buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return dir
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
			tb.Fatalf("nginx exited: %v\n%s\n%s", err, out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nginx did not listen on %s within a minute: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type buffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
