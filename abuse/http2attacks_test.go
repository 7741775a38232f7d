package abuse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The HTTP/2 attacks beside rapid reset (http2_test.go), against the
// gateway's cleartext HTTP/2 (h2c), whose bounds are those of TLS's
// (http2.go): the header list within connections.max_header_bytes,
// http2.max_concurrent_streams streams a connection, each stream within
// its write deadline.

// h2cGateway starts a gateway on h2c in front of builtin:echo with
// 16 KiB headers, 20 streams a connection and 1s+1s write deadlines.
func h2cGateway(t *testing.T) *gatewayProc {
	return startServe(t, writeFile(t, t.TempDir(), "gateway.yaml", `
upstream: builtin:echo
upstream_timeout: 1s
http2: {h2c: true, max_concurrent_streams: 20}
connections: {max_header_bytes: 16384, write_timeout: 1s}
routes: [{path: /}]
`))
}

// h2Conn is a raw HTTP/2 connection with prior knowledge: the frames
// read from it are counted until it closes (then closed is closed). It
// acknowledges no SETTINGS (a frame written by the reader could land in
// the middle of a header block).
type h2Conn struct {
	c      net.Conn
	fr     *http2.Framer
	mu     sync.Mutex
	seen   map[http2.FrameType]int
	codes  map[string]int // RST_STREAM and GOAWAY codes, and :status of HEADERS
	closed chan struct{}
}

func dialH2C(t *testing.T, addr string, settings ...http2.Setting) *h2Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2Conn{c: c, fr: http2.NewFramer(c, c), seen: map[http2.FrameType]int{}, codes: map[string]int{}, closed: make(chan struct{})}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	go h.read()
	return h
}

func (h *h2Conn) read() {
	defer close(h.closed)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.seen[f.Header().Type]++
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			h.codes["rst "+f.ErrCode.String()]++
		case *http2.GoAwayFrame:
			h.codes["goaway "+f.ErrCode.String()]++
		case *http2.MetaHeadersFrame:
			h.codes[":status "+f.PseudoValue("status")]++
		}
		h.mu.Unlock()
	}
}

func (h *h2Conn) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.codes[key]
}

// frames is the frames of type ft received.
func (h *h2Conn) frames(ft http2.FrameType) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[ft]
}

func (h *h2Conn) goaways() int { return h.frames(http2.FrameGoAway) }

func (h *h2Conn) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.codes)
}

// requestBlock is the HPACK block of GET / with extra fields.
func requestBlock(enc *hpack.Encoder, buf *bytes.Buffer, extra ...hpack.HeaderField) []byte {
	buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "abuse"}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range extra {
		enc.WriteField(f)
	}
	return bytes.Clone(buf.Bytes())
}

// legitH2C is an HTTP/2 client with prior knowledge: it must be
// answered 200 over HTTP/2.
func legitH2C(t *testing.T, url string) {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Get(url + "/")
	if err != nil {
		t.Fatalf("legitimate HTTP/2 client: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK {
		t.Fatalf("legitimate HTTP/2 client: %s %d", res.Proto, res.StatusCode)
	}
}

// Attack: CONTINUATION flood (CVE-2024-27316 and kin): a HEADERS frame
// without END_HEADERS, then CONTINUATION frames without end, each
// adding to a header block the server buffers (or decodes) while it
// waits for the end.
//
// Bound: the gateway closes the connection once the block passes
// connections.max_header_bytes (16 KiB here): of 64 MiB of CONTINUATION
// offered, it takes less than 4 MiB (the header limit plus what the
// kernel's socket buffers hold) before the connection is closed; its
// RSS grows by less than 32 MiB; a legitimate client is served after.
func TestHTTP2ContinuationFlood(t *testing.T) {
	t.Parallel()
	g := h2cGateway(t)
	legitH2C(t, g.url)
	rss := g.rss(t)
	h := dialH2C(t, hostPort(g.url))
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock(enc, &buf), EndStream: true}); err != nil {
		t.Fatal(err)
	}
	// Each CONTINUATION is 16 KiB of one literal header field's value
	// (without indexing), a new name every frame.
	chunk := bytes.Repeat([]byte("a"), 16<<10-64)
	sent := 0
	h.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	var err error
	for sent < 64<<20 && !isClosed(h) && h.goaways() == 0 {
		buf.Reset()
		enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-flood-%d", sent), Value: string(chunk)})
		if err = h.fr.WriteContinuation(1, false, buf.Bytes()); err != nil {
			break
		}
		sent += buf.Len()
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("after %s of CONTINUATION the gateway neither reads nor closes the connection", mib(int64(sent)))
	case err == nil && !isClosed(h) && h.goaways() == 0:
		t.Fatalf("the gateway took all %s of CONTINUATION without closing the connection", mib(int64(sent)))
	case sent >= 4<<20:
		t.Errorf("the gateway took %s of CONTINUATION before closing, want less than 4 MiB", mib(int64(sent)))
	}
	t.Logf("gateway said stop after %s of CONTINUATION (%v); frames: %s", mib(int64(sent)), err, h.summary())
	if grew := g.rss(t) - rss; grew > 32<<20 {
		t.Errorf("RSS grew by %s, want less than 32 MiB", mib(grew))
	}
	legitH2C(t, g.url)
	g.alive(t)
}

// Attack: an HPACK bomb: one header field of about 4 KiB put in the
// dynamic table, then referenced by its 1-byte index thousands of times
// in a header block of a few KiB, which decodes to tens of MiB.
//
// Bound: the gateway stops at connections.max_header_bytes (16 KiB of
// decoded header list): each of 40 such requests is refused (431, a
// stream reset, or the connection closed), none reaches a handler (no
// 200), and RSS grows by less than 32 MiB where the decoded blocks would
// take 40 × 32 MiB.
func TestHTTP2HPACKBomb(t *testing.T) {
	t.Parallel()
	g := h2cGateway(t)
	legitH2C(t, g.url)
	rss := g.rss(t)
	refused := 0
	for i := range 40 {
		h := dialH2C(t, hostPort(g.url))
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		big := hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)}
		block := requestBlock(enc, &buf, big) // big goes into the table here
		// Each further reference to it is its index: one byte.
		var ref bytes.Buffer
		for range 8000 {
			buf.Reset()
			enc.WriteField(big)
			ref.Write(buf.Bytes())
		}
		block = append(block, ref.Bytes()...)
		first := true
		for len(block) > 0 {
			n := min(len(block), 16000)
			var err error
			if first {
				err = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:n], EndStream: true, EndHeaders: n == len(block)})
			} else {
				err = h.fr.WriteContinuation(1, n == len(block), block[:n])
			}
			if err != nil {
				break
			}
			first, block = false, block[n:]
		}
		answered := func() bool {
			return isClosed(h) || h.count(":status 431") > 0 || h.count(":status 200") > 0 || h.goaways() > 0 ||
				h.count("rst PROTOCOL_ERROR") > 0
		}
		for deadline := time.Now().Add(20 * time.Second); !answered() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // the gateway's answer, read by h's reader
		}
		if h.count(":status 200") > 0 {
			t.Fatalf("bomb %d reached a handler: %s", i, h.summary())
		}
		if h.count(":status 431") > 0 || h.count("rst PROTOCOL_ERROR") > 0 || h.count("goaway COMPRESSION_ERROR") > 0 ||
			h.count("goaway PROTOCOL_ERROR") > 0 || h.count("goaway ENHANCE_YOUR_CALM") > 0 || isClosed(h) {
			refused++
		}
		if i == 0 {
			t.Logf("first bomb: %s", h.summary())
		}
		h.c.Close()
	}
	if refused != 40 {
		t.Errorf("%d of 40 bombs refused, want all", refused)
	}
	if grew := g.rss(t) - rss; grew > 32<<20 {
		t.Errorf("RSS grew by %s, want less than 32 MiB", mib(grew))
	}
	legitH2C(t, g.url)
	g.alive(t)
}

func isClosed(h *h2Conn) bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// Attack: zero window: a client opens the most streams a connection may
// have with an initial flow-control window of 0 and never grants more,
// so that every response blocks in its handler, holding it.
//
// Bound: each blocked stream is reset by the gateway at its write
// deadline (upstream_timeout + write_timeout, 2s here), or the
// connection closed: all 20 are let go, and a legitimate client is
// served during the attack and after.
func TestHTTP2ZeroWindow(t *testing.T) {
	t.Parallel()
	g := h2cGateway(t)
	h := dialH2C(t, hostPort(g.url), http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	block := requestBlock(enc, &buf)
	const streams = 20
	for i := range streams {
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	legitH2C(t, g.url) // during: the attacker's streams hold its own connection only
	eventually(t, 30*time.Second, func() error {
		if isClosed(h) || h.count("rst CANCEL")+h.count("rst INTERNAL_ERROR")+h.count("rst STREAM_CLOSED") >= streams {
			return nil
		}
		return fmt.Errorf("zero-window streams not let go: %s", h.summary())
	})
	if h.frames(http2.FrameData) > 0 {
		t.Errorf("DATA sent past a zero window: %s", h.summary())
	}
	t.Logf("zero-window connection: %s (closed %v)", h.summary(), isClosed(h))
	legitH2C(t, g.url)
	g.alive(t)
}
