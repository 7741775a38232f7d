package abuse

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// keepAlive opens a connection to addr, makes one keep-alive request on
// it and leaves it open and idle.
func keepAlive(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: abuse\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		c.Close()
		return nil, fmt.Errorf("keep-alive request: %s", res.Status)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// closedByPeer reports whether the server has closed c: a read ends in
// EOF (or a reset) within wait.
func closedByPeer(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, os.ErrDeadlineExceeded)
}

// until returns the time left until t, at least 100 ms.
func until(t time.Time) time.Duration { return max(time.Until(t), 100*time.Millisecond) }

// Attack: hold connections open, idle between keep-alive requests or
// silent from the start (slowloris), until the gateway runs out of
// connections or file descriptors and a new client gets no answer.
//
// Bound: connections.max (here 20) connections are open at once: at the
// cap a new connection evicts the longest-idle keep-alive connection
// (sluice_gateway_connections_evicted_total), or is closed at once when
// none is idle (sluice_gateway_connections_refused_total); an idle
// connection is closed after idle_timeout (here 1 s) and a silent one
// after read_header_timeout (here 1 s); a new client is served as soon as
// a slot frees; the admin listener has its own cap and keeps answering.
func TestIdleConnections(t *testing.T) {
	t.Parallel()
	const max, idle, attackers = 20, time.Second, 60
	// Bounds on the waits, not timing assertions: wide for a loaded
	// machine, below the defaults (idle_timeout 75 s, read_header_timeout
	// 10 s) so that only the configured timeouts can close the
	// connections in time.
	const idleWait, headerWait = 30 * time.Second, 8 * time.Second
	dir := t.TempDir()
	cfg := writeFile(t, dir, "gateway.yaml", fmt.Sprintf(`
upstream: builtin:echo
connections:
  max: %d
  idle_timeout: %v
  read_header_timeout: %v
routes:
  - path: /
`, max, idle, idle))
	g := startServe(t, cfg)
	addr := hostPort(g.url)
	c := client(t)

	// Keep-alive connections, three times the cap.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := 0; i < attackers; i++ {
		kc, err := keepAlive(addr)
		if err != nil {
			t.Fatalf("keep-alive connection %d: %v", i, err)
		}
		conns = append(conns, kc)
	}
	m := scrape(t, g.admin)
	if open := m.value(t, "sluice_gateway_connections_open", "listener", "public"); open > max {
		t.Errorf("%d keep-alive connections: %v open, want at most %d", attackers, open, max)
	}
	if ev := m.value(t, "sluice_gateway_connections_evicted_total", "listener", "public"); ev < attackers-max {
		t.Errorf("%d keep-alive connections past a cap of %d: %v evicted, want at least %d", attackers, max, ev, attackers-max)
	}
	if code, _, _ := do(t, c, "GET", g.url+"/"); code != http.StatusOK {
		t.Errorf("a new client among %d idle connections: %d", attackers, code)
	}
	// Every attacking connection is closed by the idle timeout (the
	// evicted ones already).
	for i, kc := range conns {
		if !closedByPeer(kc, until(start.Add(idle+idleWait))) {
			t.Errorf("keep-alive connection %d still open %v after its request (idle_timeout %v)", i, time.Since(start).Round(time.Millisecond), idle)
		}
	}
	c.CloseIdleConnections()
	eventually(t, idleWait, func() error {
		if open := scrape(t, g.admin).value(t, "sluice_gateway_connections_open", "listener", "public"); open != 0 {
			return fmt.Errorf("%v connections open after idle_timeout, want 0", open)
		}
		return nil
	})

	// Silent connections: no request at all, more than the cap.
	conns = conns[:0]
	start = time.Now()
	for i := 0; i < 2*max; i++ {
		sc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("silent connection %d: %v", i, err)
		}
		conns = append(conns, sc)
	}
	// The admin listener is not the public one's cap.
	eventually(t, idleWait, func() error {
		m := scrape(t, g.admin)
		if open := m.value(t, "sluice_gateway_connections_open", "listener", "public"); open > max {
			return fmt.Errorf("%d silent connections: %v open, want at most %d", 2*max, open, max)
		}
		if ref := m.value(t, "sluice_gateway_connections_refused_total", "listener", "public"); ref < max {
			return fmt.Errorf("%d silent connections at a cap of %d: %v refused, want at least %d", 2*max, max, ref, max)
		}
		return nil
	})
	// A new client is served once read_header_timeout has closed them.
	served := time.Duration(0)
	eventually(t, idle+headerWait, func() error {
		code, _, _, err := tryDo(c, "GET", g.url+"/")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d", code)
		}
		served = time.Since(start)
		return nil
	})
	for i, sc := range conns {
		if !closedByPeer(sc, until(start.Add(idle+headerWait))) {
			t.Errorf("silent connection %d still open after %v (read_header_timeout %v)", i, time.Since(start).Round(time.Millisecond), idle)
		}
	}
	t.Logf("a new client was served %v after %d silent connections (read_header_timeout %v)", served.Round(time.Millisecond), 2*max, idle)
}
