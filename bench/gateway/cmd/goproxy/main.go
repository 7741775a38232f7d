// Command goproxy is the bare Go reverse proxy bench/gateway compares
// sluice serve with: net/http/httputil.ReverseProxy in front of one
// upstream, with a Transport that keeps enough idle connections to the
// upstream for every client (MaxIdleConnsPerHost) and, unless
// -buffer-pool=false, a pool of the 32 KiB buffers ReverseProxy copies
// bodies through (without one it allocates a buffer per request, as most
// code using it does), and nothing else. It prints "listening ADDR" on
// standard output once it accepts connections.
//
//	goproxy -listen 127.0.0.1:0 -upstream http://127.0.0.1:8081 -idle 256
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "upstream base URL (required)")
	idle := flag.Int("idle", 256, "idle connections kept to the upstream (MaxIdleConnsPerHost)")
	pool := flag.Bool("buffer-pool", true, "reuse the body copy buffers (httputil.BufferPool)")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		log.Fatalf("goproxy: bad -upstream %q", *upstream)
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          *idle,
		MaxIdleConnsPerHost:   *idle,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.SetXForwarded()
		},
		Transport: tr,
	}
	if *pool {
		rp.BufferPool = &buffers{}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// buffers is a httputil.BufferPool of 32 KiB buffers (io.Copy's size).
type buffers struct{ p sync.Pool }

func (b *buffers) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *buffers) Put(buf []byte) { b.p.Put(&buf) }
