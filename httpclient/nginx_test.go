package httpclient

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/testharness/nginxtest"
)

// startNginx runs a real nginx with limit_req (rate, burst, nodelay) and
// limit_req_status 429 on a free loopback port, and returns its base URL.
// It skips when nginx is not installed, unless CI=true.
func startNginx(t *testing.T, rate string, burst int) string {
	t.Helper()
	nginxtest.Binary(t)
	www := t.TempDir()
	if err := os.WriteFile(filepath.Join(www, "ok.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := nginxtest.FreeAddr(t)
	nginxtest.Start(t, addr, fmt.Sprintf(`
    limit_req_zone $binary_remote_addr zone=one:1m rate=%[3]s;
    limit_req_status 429;
    server {
        listen %[2]s;
        root %[1]s;
        location / {
            limit_req zone=one burst=%[4]d nodelay;
            try_files /ok.txt =404;
        }
    }
`, www, addr, rate, burst))
	return "http://" + addr
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
