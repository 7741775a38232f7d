package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveProcess runs `sluice serve args...` in process and returns the
// public and admin base URLs it logs, and a channel of every later log line.
func serveProcess(t *testing.T, args ...string) (pub, admin string, logs <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...), io.Discard, pw)
		pw.Close()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody is reading
			}
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
		for range lines {
		}
	})
	re := regexp.MustCompile(`msg="sluice serve: listening" addr=(\S+) admin=(\S+)`)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before listening")
			}
			if m := re.FindStringSubmatch(l); m != nil {
				return "http://" + m[1], "http://" + m[2], lines
			}
		case <-timeout:
			t.Fatal("serve did not log its addresses")
		}
	}
}

func status(t *testing.T, url string, hdr ...string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header
}

// The README's first command: the built-in config serves 200s, then a 429
// with the documented headers.
func TestServeDefault(t *testing.T) {
	pub, admin, _ := serveProcess(t)
	var got []int
	var last http.Header
	for range 6 {
		code, h := status(t, pub+"/hello")
		got = append(got, code)
		last = h
	}
	if fmt.Sprint(got) != "[200 200 200 200 200 429]" {
		t.Errorf("anonymous: %v, want [200 200 200 200 200 429]", got)
	}
	if last.Get("Retry-After") != "12" || last.Get("RateLimit-Policy") != `"per-ip";q=5;w=60` || last.Get("RateLimit") != `"per-ip";r=0;t=60` {
		t.Errorf("429 headers: Retry-After %q RateLimit-Policy %q RateLimit %q", last.Get("Retry-After"), last.Get("RateLimit-Policy"), last.Get("RateLimit"))
	}
	if code, h := status(t, pub+"/hello", "X-API-Key", "sluice-demo-key"); code != 200 || h.Get("RateLimit-Policy") != `"per-user";q=20;w=20` {
		t.Errorf("demo key: %d RateLimit-Policy %q", code, h.Get("RateLimit-Policy"))
	}
	if code, _ := status(t, pub+"/hello", "X-API-Key", "wrong"); code != 401 {
		t.Errorf("wrong key: %d, want 401", code)
	}
	if code, _ := status(t, admin+"/metrics"); code != 200 {
		t.Errorf("/metrics: %d", code)
	}
}

func TestServeReloadsOnFileChangeAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	cfg := `upstream: builtin:echo
routes:
  - path: /
    rate_limits: [{actions: [{remote_address: {}}]}]
rules:
  domain: d
  descriptors:
    - key: remote_address
      rate_limit: {name: ip, algorithm: token_bucket, unit: hour, requests_per_unit: 2}
`
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, _, logs := serveProcess(t, "--config", file)
	waitLog := func(want string) {
		t.Helper()
		timeout := time.After(10 * time.Second) // reload must happen within 5 s
		for {
			select {
			case l := <-logs:
				if strings.Contains(l, want) {
					return
				}
			case <-timeout:
				t.Fatalf("no log line with %q", want)
			}
		}
	}
	if _, h := status(t, pub+"/"); h.Get("RateLimit-Policy") != `"ip";q=2;w=3600` {
		t.Fatalf("before reload: %q", h.Get("RateLimit-Policy"))
	}
	os.WriteFile(file, []byte(strings.Replace(cfg, "requests_per_unit: 2", "requests_per_unit: 7", 1)), 0o644)
	waitLog(`trigger="file changed"`)
	if _, h := status(t, pub+"/"); h.Get("RateLimit-Policy") != `"ip";q=7;w=3600` {
		t.Errorf("after file change: %q", h.Get("RateLimit-Policy"))
	}
	os.WriteFile(file, []byte(strings.Replace(cfg, "unit: hour", "unit: eon", 1)), 0o644)
	waitLog("config refused")
	if _, h := status(t, pub+"/"); h.Get("RateLimit-Policy") != `"ip";q=7;w=3600` {
		t.Errorf("after a bad file: %q, want the previous config", h.Get("RateLimit-Policy"))
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitLog(`trigger=SIGHUP`)
}
