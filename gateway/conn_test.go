package gateway_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// openConfig is an unlimited gateway in front of upstream.
const openConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
routes: [{path: /}]
`

// waitFor polls cond until it holds, failing the test after a minute
// (a bound for a hung test, not a timing requirement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// keepAlive is an HTTP/1.1 connection that a test drives by hand.
type keepAlive struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, base string) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return &keepAlive{c, bufio.NewReader(c)}
}

// get sends GET p on the connection and returns the status, or an error
// when the connection is closed.
func (k *keepAlive) get(p string) (int, error) {
	k.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(k, "GET %s HTTP/1.1\r\nHost: gw.test\r\n\r\n", p); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// getBody is get, with the body.
func (k *keepAlive) getBody(p string) (int, string) {
	k.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(k, "GET %s HTTP/1.1\r\nHost: gw.test\r\n\r\n", p); err != nil {
		return 0, ""
	}
	res, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, ""
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(b)
}

// closedByPeer waits for the server to close the connection: a read
// that ends in EOF or a reset, not in a timeout.
func (k *keepAlive) closedByPeer(t *testing.T) bool {
	t.Helper()
	k.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := k.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func gauge(t *testing.T, s *server, listener string) string {
	return metric(t, s, `sluice_gateway_connections_open{listener="`+listener+`"}`)
}

// Idle keep-alive connections are closed after idle_timeout.
func TestIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	s := start(t, "", fmt.Sprintf(openConfig, "builtin:echo")+"connections: {idle_timeout: 200ms}\n")
	const n = 20
	conns := make([]*keepAlive, n)
	for i := range conns {
		conns[i] = dial(t, s.url)
		if code, err := conns[i].get("/"); code != 200 {
			t.Fatalf("conn %d: %d %v", i, code, err)
		}
	}
	for i, c := range conns {
		if !c.closedByPeer(t) {
			t.Errorf("idle conn %d still open after 30s with idle_timeout 200ms", i)
		}
	}
	waitFor(t, "open public connections back to 0", func() bool { return gauge(t, s, "public") == "0" })
}

// At max, a new connection takes the place of the one idle the longest;
// the count never passes max.
func TestConnectionCapEvictsIdle(t *testing.T) {
	t.Parallel()
	s := start(t, "", fmt.Sprintf(openConfig, "builtin:echo")+"connections: {max: 5}\n")
	old := make([]*keepAlive, 5)
	for i := range old {
		old[i] = dial(t, s.url)
		if code, err := old[i].get("/"); code != 200 {
			t.Fatalf("conn %d: %d %v", i, code, err)
		}
	}
	waitFor(t, "5 open", func() bool { return gauge(t, s, "public") == "5" })
	for i := range 3 { // three newcomers, each on a connection of its own
		if code, err := dial(t, s.url).get("/"); code != 200 {
			t.Fatalf("newcomer %d at the cap: %d %v, want 200", i, code, err)
		}
		if got := gauge(t, s, "public"); got != "5" {
			t.Errorf("open connections after newcomer %d = %s, want 5 (the cap)", i, got)
		}
	}
	if got := metric(t, s, `sluice_gateway_connections_evicted_total{listener="public"}`); got != "3" {
		t.Errorf("evicted = %q, want 3", got)
	}
	if got := metric(t, s, `sluice_gateway_connections_refused_total{listener="public"}`); got != "0" {
		t.Errorf("refused = %q, want 0", got)
	}
	// Three of the old idle connections were closed (which three depends
	// on when the server saw each go idle, which a loaded machine can
	// reorder); the other two still serve.
	evicted := 0
	for _, c := range old {
		if _, err := c.get("/"); err != nil {
			evicted++
		}
	}
	if evicted != 3 {
		t.Errorf("%d of the 5 old connections were closed, want 3", evicted)
	}
}

// At max with no idle connection, a new connection is closed at once
// (and counted); once one closes, a new client is served.
func TestConnectionCapRefuses(t *testing.T) {
	t.Parallel()
	s := start(t, "", fmt.Sprintf(openConfig, "builtin:echo")+"connections: {max: 3}\n")
	held := make([]*keepAlive, 3)
	for i := range held { // connected, no request yet: not idle, not evictable
		held[i] = dial(t, s.url)
	}
	waitFor(t, "3 open", func() bool { return gauge(t, s, "public") == "3" })
	for i := range 4 {
		if !dial(t, s.url).closedByPeer(t) {
			t.Fatalf("connection %d over the cap was not closed", i)
		}
	}
	if got := metric(t, s, `sluice_gateway_connections_refused_total{listener="public"}`); got != "4" {
		t.Errorf("refused = %q, want 4", got)
	}
	if got := gauge(t, s, "public"); got != "3" {
		t.Errorf("open = %s, want 3", got)
	}
	held[0].Close()
	waitFor(t, "2 open", func() bool { return gauge(t, s, "public") == "2" })
	if code, err := dial(t, s.url).get("/"); code != 200 {
		t.Errorf("after one closed: %d %v, want 200", code, err)
	}
	// The held connections are served once they send a request.
	if code, err := held[1].get("/"); code != 200 {
		t.Errorf("held connection: %d %v, want 200", code, err)
	}
}

// The admin listener has its own cap.
func TestAdminConnectionCap(t *testing.T) {
	t.Parallel()
	s := start(t, "", fmt.Sprintf(openConfig, "builtin:echo")+"admin_connections: {max: 1}\n")
	held := dial(t, s.admin)
	waitFor(t, "a second admin connection refused", func() bool { return dial(t, s.admin).closedByPeerQuick() })
	held.Close()
	// Once the held connection is gone, the one slot serves (a
	// connection at a time: each is closed before the next is dialled,
	// and the server may take a moment to see the close).
	var body string
	waitFor(t, "admin served once the slot is free", func() bool {
		k := dial(t, s.admin)
		defer k.Close()
		code, b := k.getBody("/metrics")
		body = b
		return code == 200
	})
	if !strings.Contains(body, `sluice_gateway_connections_refused_total{listener="admin"}`) {
		t.Errorf("admin refusals not counted:\n%s", body)
	}
}

// closedByPeerQuick reports whether the connection was closed at once
// (within a second): it is only used inside waitFor, which retries.
func (k *keepAlive) closedByPeerQuick() bool {
	k.SetReadDeadline(time.Now().Add(time.Second))
	_, err := k.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A body that does not arrive within read_timeout ends the request; a
// complete body whose upstream takes longer than read_timeout is not cut.
func TestReadTimeoutBoundsTheBodyOnly(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if r.URL.Path == "/slow" {
			time.Sleep(600 * time.Millisecond) // three read_timeouts
		}
		fmt.Fprintf(w, "%d", len(b))
	}))
	t.Cleanup(up.Close)
	s := start(t, "", fmt.Sprintf(openConfig, up.URL)+"connections: {read_timeout: 200ms}\n")

	k := dial(t, s.url)
	k.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(k, "POST /x HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 100\r\n\r\n0123456789")
	// The upstream sees the body end short (and answers, or not); the
	// client's connection is closed, not held open for the 90 bytes.
	if res, err := http.ReadResponse(k.r, nil); err == nil {
		b, _ := io.ReadAll(res.Body)
		if string(b) == "100" {
			t.Errorf("the upstream read a body of 100 bytes from 10")
		}
	}
	if !k.closedByPeer(t) {
		t.Errorf("the connection of a stalled body is still open after 30s with read_timeout 200ms")
	}

	res2, err := http.Post(s.url+"/slow", "text/plain", strings.NewReader("hello"))
	must(t, err)
	b, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.StatusCode != 200 || string(b) != "5" {
		t.Errorf("slow upstream, complete body: %d %q, want 200 \"5\"", res2.StatusCode, b)
	}
}

// A client that does not read its response is cut off after the route's
// upstream_timeout plus write_timeout instead of holding the connection
// (and the upstream's) for as long as it likes.
func TestWriteTimeoutBoundsSlowReaders(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		buf := make([]byte, 1<<16)
		for n := 0; n < size; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	s := start(t, "", fmt.Sprintf(openConfig, up.URL)+"upstream_timeout: 300ms\nconnections: {write_timeout: 200ms}\n")
	k := dial(t, s.url)
	fmt.Fprintf(k, "GET /big HTTP/1.1\r\nHost: gw.test\r\n\r\n")
	waitFor(t, "the gateway to open the connection", func() bool { return gauge(t, s, "public") == "1" })
	// Without reading a byte, the client sees the gateway give up.
	waitFor(t, "the gateway to close the connection of a client that does not read", func() bool {
		return gauge(t, s, "public") == "0"
	})
	k.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, _ := io.Copy(io.Discard, k.r)
	if n >= size {
		t.Errorf("read %d bytes, want fewer than %d: the response was cut", n, size)
	}
}

// A header block over max_header_bytes is refused with 431.
func TestMaxHeaderBytes(t *testing.T) {
	t.Parallel()
	s := start(t, "", fmt.Sprintf(openConfig, "builtin:echo")+"connections: {max_header_bytes: 4096}\n")
	code, _ := rawRequest(t, strings.TrimPrefix(s.url, "http://"), "GET", "/", "gw.test", "X-Big", strings.Repeat("a", 16<<10))
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB header with max_header_bytes 4096: %d, want 431", code)
	}
	if code, _ := rawRequest(t, strings.TrimPrefix(s.url, "http://"), "GET", "/", "gw.test", "X-Small", "a"); code != 200 {
		t.Errorf("small header: %d, want 200", code)
	}
}
