//go:build linux

package h2grpc

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
)

// TestRawIO: TCP connections, a LimitListener's included, are read and
// written through their sockets; TLS through the connection. A read
// after the peer has closed is io.EOF, a read of a closed connection
// net.ErrClosed, and a write larger than rawWriteMax goes through whole.
func TestRawIO(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := LimitListener(inner, 4)
	defer lis.Close()
	for _, wrap := range []string{"tcp", "limit"} {
		cli, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		var nc net.Conn
		if wrap == "tcp" {
			nc, err = inner.Accept()
		} else {
			nc, err = lis.Accept()
		}
		if err != nil {
			t.Fatal(err)
		}
		rw := newRawIO(nc)
		if _, ok := rw.(*rawIO); !ok {
			t.Fatalf("%s: newRawIO returned %T", wrap, rw)
		}
		big := make([]byte, 3*rawWriteMax+7)
		for i := range big {
			big[i] = byte(i)
		}
		got := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(cli)
			got <- b
		}()
		for _, p := range [][]byte{[]byte("hello"), big} {
			if n, err := rw.Write(p); n != len(p) || err != nil {
				t.Fatalf("%s: Write: %d, %v", wrap, n, err)
			}
		}
		// The client reads until the server half-closes.
		nc.(interface{ CloseWrite() error }).CloseWrite()
		if b := <-got; len(b) != 5+len(big) || string(b[:5]) != "hello" || b[5+rawWriteMax] != big[rawWriteMax] {
			t.Fatalf("%s: the client read %d bytes", wrap, len(b))
		}
		if _, err := cli.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		cli.Close()
		buf := make([]byte, 16)
		if n, err := io.ReadFull(rw, buf[:4]); n != 4 || string(buf[:4]) != "ping" {
			t.Fatalf("%s: Read: %q, %v", wrap, buf[:n], err)
		}
		if _, err := rw.Read(buf); err != io.EOF {
			t.Fatalf("%s: Read after the peer closed: %v, want io.EOF", wrap, err)
		}
		nc.Close()
		if _, err := rw.Read(buf); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("%s: Read of a closed connection: %v, want net.ErrClosed", wrap, err)
		}
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	tc := tls.Server(a, &tls.Config{})
	if rw := newRawIO(tc); rw != io.ReadWriter(tc) {
		t.Fatalf("TLS: newRawIO returned %T", rw)
	}
}
