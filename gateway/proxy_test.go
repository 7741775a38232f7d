package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

func TestUpstreamIdleConnectionsConfig(t *testing.T) {
	t.Parallel()
	base := "upstream: http://127.0.0.1:1\nroutes:\n  - path: /\n"
	for extra, want := range map[string]int{"": gateway.DefaultUpstreamIdleConnections, "upstream_idle_connections: 1\n": 1, "upstream_idle_connections: 4096\n": 4096} {
		cfg, err := gateway.Parse("gw.yaml", []byte(base+extra))
		if err != nil || cfg.UpstreamIdleConnections != want {
			t.Errorf("%q: %v; want %d", extra, err, want)
			continue
		}
	}
	for _, bad := range []string{"upstream_idle_connections: 0\n", "upstream_idle_connections: -3\n", "upstream_idle_connections: many\n", "upstream_idle_connections: 100000\n"} {
		if _, err := gateway.Parse("gw.yaml", []byte(base+bad)); err == nil || !strings.Contains(err.Error(), "gw.yaml:4: upstream_idle_connections") {
			t.Errorf("%q: %v, want an error at gw.yaml:4", bad, err)
		}
	}
}

// The proxy keeps its upstream connections for the next requests: 16
// clients sending 50 requests each open about 16 upstream connections,
// not one per request (as with net/http's default of 2 idle connections
// per host, where 14 of every 16 finished requests close theirs).
func TestUpstreamConnectionsReused(t *testing.T) {
	t.Parallel()
	var dials atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	cfg, err := gateway.Parse("gw.yaml", []byte("upstream: "+up.URL+"\nroutes:\n  - path: /\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gw := httptest.NewServer(g.Handler())
	defer gw.Close()
	const clients, each = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			for range each {
				res, err := c.Get(gw.URL + "/x")
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", res.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A connection dialed while another was on its way back to the pool
	// stays in the pool too, so the count can pass 16 a little; one per
	// request (800) means no reuse.
	if n := dials.Load(); n > 4*clients {
		t.Errorf("%d upstream connections for %d requests from %d clients", n, clients*each, clients)
	}
}
