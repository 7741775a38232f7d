package abuse

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// rapidReset opens HTTP/2 connections to addr over TLS and, on each,
// opens streams and resets them at once (CVE-2023-44487), reconnecting
// when the gateway closes one, until stop is closed. It returns the
// streams opened and the connections the gateway closed.
func rapidReset(addr string, cfg *tls.Config, stop <-chan struct{}) (streams, closed int) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "abuse"}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()
	for {
		select {
		case <-stop:
			return streams, closed
		default:
		}
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return streams, closed
		}
		go io.Copy(io.Discard, c) // the gateway's frames, unread
		fr := http2.NewFramer(c, nil)
		c.Write([]byte(http2.ClientPreface))
		fr.WriteSettings()
		for id := uint32(1); ; id += 2 {
			select {
			case <-stop:
				c.Close()
				return streams, closed
			default:
			}
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				closed++
				break
			}
			streams++
		}
		c.Close()
	}
}

// Attack: HTTP/2 rapid reset: a client opens streams and resets each at
// once, so that the server starts a handler (here one that proxies to an
// upstream taking 20 ms) for each while the client's stream count stays
// near zero.
//
// Bound: Go's server runs at most http2.max_concurrent_streams handlers
// a connection, queues a few more, and closes a connection that resets
// streams faster than its handlers finish. Over a 2 s flood on 2
// connections at a time, a legitimate HTTP/2 client on its own
// connection is answered on every request (counted, not timed), and
// after it too.
func TestHTTP2RapidReset(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("ok\n"))
	}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	ca := testcerts.NewCA("abuse CA")
	if _, _, err := ca.Server("127.0.0.1").Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "gateway.yaml", "upstream: "+up.URL+`
tls: {cert_file: server.crt, key_file: server.key}
http2: {max_concurrent_streams: 50}
routes: [{path: /}]
`)
	g := startServe(t, cfg)
	addr := hostPort(g.url)
	tlsCfg := &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}}

	var p http.Protocols
	p.SetHTTP2(true)
	legit := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Protocols: &p, TLSClientConfig: tlsCfg}}
	url := "https://" + addr + "/"
	get := func() error {
		res, err := legit.Get(url)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK {
			return &statusError{res.Proto, res.StatusCode}
		}
		return nil
	}
	if err := get(); err != nil {
		t.Fatalf("before the flood: %v", err)
	}

	stop := make(chan struct{})
	var streams, closed atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			s, c := rapidReset(addr, tlsCfg, stop)
			streams.Add(int64(s))
			closed.Add(int64(c))
		})
	}
	answered, failed := 0, 0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := get(); err != nil {
			failed++
			t.Logf("during the flood: %v", err)
		} else {
			answered++
		}
	}
	close(stop)
	wg.Wait()
	for i := range 5 {
		if err := get(); err != nil {
			t.Errorf("after the flood, request %d: %v", i, err)
		}
	}
	t.Logf("flood: %d streams opened and reset, %d connections closed by the gateway; legitimate client: %d answered, %d failed",
		streams.Load(), closed.Load(), answered, failed)
	if failed > 0 || answered == 0 {
		t.Errorf("legitimate client during the flood: %d answered, %d failed; want every request answered", answered, failed)
	}
	if streams.Load() == 0 {
		t.Error("the flood opened no stream (HTTP/2 not offered?)")
	}
	g.alive(t)
}

type statusError struct {
	proto string
	code  int
}

func (e *statusError) Error() string {
	return strings.TrimSpace(e.proto + " " + http.StatusText(e.code))
}
