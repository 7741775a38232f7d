package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkHandler is the gateway's public handler with builtin:echo, with
// limits off (the kill switch) and on (one token bucket per client IP):
// routing, identity, decision, headers, metrics; and on with access_log
// (a file, a bound no line is dropped for: the cost of a line a request).
// bench/gateway measures the same over real HTTP.
func BenchmarkHandler(b *testing.B) {
	access := "access_log: {file: " + filepath.Join(b.TempDir(), "access.log") + ", max_per_second: 1000000}"
	for _, tc := range []struct{ name, disabled, extra string }{
		{"limits-off", "true", ""}, {"limits-on", "false", ""}, {"limits-on-access-log", "false", access},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := benchHandler(b, "upstream: builtin:echo\ndisabled: "+tc.disabled+"\n"+tc.extra+"\n")
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				remote := "10.0.0." + strconv.Itoa(int(n.Add(1))%250) + ":1"
				for pb.Next() {
					r := httptest.NewRequest("GET", "/hello", nil)
					r.RemoteAddr = remote
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Errorf("status %d", w.Code)
						return
					}
				}
			})
		})
	}
}

// BenchmarkProxy is the gateway in front of a real upstream (an
// httptest server answering "ok"), over real HTTP (a keep-alive client,
// the gateway's own Serve), beside a bare httputil.ReverseProxy served by
// an http.Server to the same upstream with the same Transport tuning.
// allocs/op and B/op count the client, the proxy and the upstream
// server, which are the same for each: the difference to
// bare-reverseproxy is what the gateway adds per request.
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok\n"))
	}))
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, base string) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := c.Get(base + "/hello")
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Errorf("status %d", res.StatusCode)
					return
				}
			}
		})
	}
	// bare-reverseproxy allocates a 32 KiB copy buffer per request, as
	// ReverseProxy does without a BufferPool; -pool has one, as the
	// gateway does.
	for _, pool := range []bool{false, true} {
		name := "bare-reverseproxy"
		if pool {
			name += "-pool"
		}
		b.Run(name, func(b *testing.B) {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.DisableCompression = 1024, 256, true
			defer tr.CloseIdleConnections()
			rp := &httputil.ReverseProxy{Transport: tr, Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
			}}
			if pool {
				rp.BufferPool = &benchBuffers{}
			}
			srv := httptest.NewServer(rp)
			defer srv.Close()
			run(b, srv.URL)
		})
	}
	for _, tc := range []struct{ name, disabled string }{{"limits-off", "true"}, {"limits-on", "false"}} {
		b.Run(tc.name, func(b *testing.B) {
			g := benchGateway(b, "upstream: "+up.URL+"\ndisabled: "+tc.disabled+"\n")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Serve(ctx, ln, nil) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			run(b, "http://"+ln.Addr().String())
		})
	}
}

// benchBuffers is a plain httputil.BufferPool, as a program using
// ReverseProxy would write one.
type benchBuffers struct{ p sync.Pool }

func (bp *benchBuffers) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (bp *benchBuffers) Put(b []byte) { bp.p.Put(&b) }
