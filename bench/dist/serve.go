package dist

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/bench/rls"
)

// ExactAddr is the client address whose limit is the exactness run's in
// `sluice serve`'s configuration; every other address has a limit nothing
// reaches.
const ExactAddr = "10.255.0.1"

// serveConfig is `sluice serve` as a decision endpoint (decision.proxy
// nginx: the client's address in X-Forwarded-For), limited by client
// address: listen, admin listener, store, the exact limit.
const serveConfig = `listen: %s
admin_listen: %s
decision: {proxy: nginx}
identity: {trusted_proxies: [127.0.0.1]}
store: %s
routes:
  - path: /
    rate_limits:
      - actions: [{remote_address: {}}]
rules:
  domain: dist
  descriptors:
    - key: remote_address
      rate_limit: {unit: second, requests_per_unit: 1000000000}
    - key: remote_address
      value: "` + ExactAddr + `"
      rate_limit: {unit: second, requests_per_unit: %d}
`

// Serve returns the target of `sluice serve`'s decision endpoint: a GET
// as nginx's auth_request sends it, the counter's value hashed to a
// client address in 10.0.0.0/9 (key "exact": ExactAddr); 200 admits.
func Serve() Target {
	return Target{
		ClockWindows: true,
		Request: func(key, value string, _ int64) ([]byte, error) {
			if key == "exact" {
				return []byte(ExactAddr), nil
			}
			h := fnv.New32a()
			h.Write([]byte(value))
			v := h.Sum32()
			return fmt.Appendf(nil, "10.%d.%d.%d", v>>16&127, v>>8&255, v&255), nil
		},
		Dial: func(addr string) (Conn, error) {
			t := &http.Transport{MaxIdleConnsPerHost: 64}
			return httpConn{&http.Client{Transport: t, Timeout: 10 * time.Second}, "http://" + addr + "/"}, nil
		},
	}
}

type httpConn struct {
	c   *http.Client
	url string
}

func (h httpConn) Call(ctx context.Context, req []byte) (bool, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return false, err
	}
	r.Header.Set("X-Original-Method", "GET")
	r.Header.Set("X-Original-URI", "/api")
	r.Header.Set("X-Forwarded-For", string(req))
	resp, err := h.c.Do(r)
	if err != nil {
		return false, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return true, nil
	case resp.StatusCode == http.StatusForbidden && resp.Header.Get("X-Sluice-Status") == "429":
		return false, nil
	}
	return false, fmt.Errorf("sluice serve: status %d (%s)", resp.StatusCode, resp.Header.Get("X-Sluice-Status"))
}

func (h httpConn) Close() error { h.c.CloseIdleConnections(); return nil }

// StartServes runs n `sluice serve` decision endpoints on the
// redis-server at redisAddr (process redisPID, charged to the set), the
// exact limit limit a second, configurations written in dir/serve.
func StartServes(ctx context.Context, bin, dir, redisAddr string, redisPID, n, limit int) (*Set, error) {
	s := &Set{Name: fmt.Sprintf("sluice serve ×%d + redis", n), Target: Serve(), PIDs: []int{redisPID}}
	dir = filepath.Join(dir, "serve") // not among sluice rls's files
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for i := range n {
		ports, err := rls.FreePorts(2)
		if err != nil {
			return nil, s.add(nil, err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		file := filepath.Join(dir, fmt.Sprintf("serve-%d.yaml", i))
		cfg := fmt.Sprintf(serveConfig, addr, "127.0.0.1:"+strconv.Itoa(ports[1]), "redis://"+redisAddr, limit)
		if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
			return nil, s.add(nil, err)
		}
		cmd := exec.CommandContext(ctx, bin, "serve", "--config", file)
		if err := s.add(rls.Launch(ctx, fmt.Sprintf("sluice serve %d", i), addr, cmd, waitServe)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// waitServe asks p for a decision until it admits one (at most 60 s).
func waitServe(ctx context.Context, p *rls.Proc) error {
	c, _ := Serve().Dial(p.Addr)
	defer c.Close()
	var last error = errors.New("no answer")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := p.Exited(); err != nil {
			return err
		}
		ok, err := c.Call(ctx, []byte("10.0.0.1"))
		if ok {
			return nil
		}
		last = err
	}
	return fmt.Errorf("not ready within a minute: %v", last)
}
