package httpclient

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// startNginx runs a real nginx with limit_req (rate, burst, nodelay) and
// limit_req_status 429 on a free loopback port, and returns its base URL.
// It skips when nginx is not installed, unless CI=true.
func startNginx(t *testing.T, rate string, burst int) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			bin, err = "/usr/sbin/nginx", nil
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx not found (scripts/test installs it): %v", err)
		}
		t.Skip("nginx not installed")
	}
	dir := t.TempDir()
	for _, d := range []string{"www", "tmp", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "ok.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
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
    limit_req_zone $binary_remote_addr zone=one:1m rate=%[3]s;
    limit_req_status 429;
    server {
        listen %[2]s;
        root %[1]s/www;
        location / {
            limit_req zone=one burst=%[4]d nodelay;
            try_files /ok.txt =404;
        }
    }
}
`, dir, addr, rate, burst)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "logs", "error.log"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
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
			break
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", err, out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s within a minute: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addr
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// TestNginx: N URLs against nginx limit_req (no Retry-After: nginx sends
// none) complete with no failures and few 429s, with the rate found by
// AIMD.
func TestNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx")
	}
	t.Parallel()
	base := startNginx(t, "40r/s", 5)
	// Does nginx really limit? A quick burst must see 429s.
	var raw int
	for range 20 {
		resp, err := http.Get(base + "/probe")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 429 {
			raw++
		}
	}
	if raw == 0 {
		t.Fatalf("nginx sent no 429 to a burst of 20: limit_req not in effect")
	}
	time.Sleep(300 * time.Millisecond) // let the zone drain

	var throttled, attempts atomic.Int64
	c := NewClient(Options{
		Concurrency: 8,
		Adaptive:    adaptive.Options{Initial: 10},
		Observer: ObserverFunc(func(e Event) {
			if e.Kind == Attempt {
				attempts.Add(1)
				if e.Status == 429 {
					throttled.Add(1)
				}
			}
		}),
	})
	const n = 80
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/item/%d", base, i), nil)
			resp, err := c.Do(req)
			if err != nil {
				failed.Add(1)
				t.Errorf("GET %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				failed.Add(1)
				t.Errorf("GET %d: %s", i, resp.Status)
			}
		})
	}
	wg.Wait()
	hosts := c.Transport.(*Transport).Hosts()
	t.Logf("nginx 40r/s burst 5: %d URLs in %v, %d attempts, %d 429s, failed %d, final rate %.1f/s",
		n, time.Since(start).Round(time.Millisecond), attempts.Load(), throttled.Load(), failed.Load(), hosts[0].Rate)
	// At most the requests in flight when the first 429 came back, and a
	// few more: "few 429s".
	if got := throttled.Load(); got > n/8 {
		t.Errorf("%d 429s for %d URLs, want at most %d", got, n, n/8)
	}
}
