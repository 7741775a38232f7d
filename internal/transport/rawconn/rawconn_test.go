package rawconn_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/transport/rawconn"
)

// TestConn: over TCP and Unix sockets, what one side writes through Wrap
// the other reads whole (a write past 64 KiB too), a read after the peer
// has closed is io.EOF, a read past the deadline times out, and a read of
// a closed connection is net.ErrClosed.
func TestConn(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "s")
			}
			lis, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			cli, err := net.Dial(network, lis.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			nc, err := lis.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c := rawconn.Wrap(nc)
			if runtime.GOOS == "linux" && c == nc {
				t.Fatalf("Wrap returned the %T itself", nc)
			}

			big := make([]byte, 3<<16+7)
			for i := range big {
				big[i] = byte(i * 7)
			}
			got := make(chan []byte)
			go func() {
				b, _ := io.ReadAll(cli)
				got <- b
			}()
			for _, p := range [][]byte{[]byte("hello"), big} {
				if n, err := c.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			nc.(interface{ CloseWrite() error }).CloseWrite()
			if b := <-got; len(b) != 5+len(big) || string(b[:5]) != "hello" || string(b[5:]) != string(big) {
				t.Fatalf("the client read %d bytes, want %d", len(b), 5+len(big))
			}

			buf := make([]byte, 16)
			c.SetReadDeadline(time.Now().Add(-time.Second))
			if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Read past the deadline: %v", err)
			}
			c.SetReadDeadline(time.Time{})
			if _, err := cli.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			cli.Close()
			if n, err := io.ReadFull(c, buf[:4]); n != 4 || string(buf[:4]) != "ping" {
				t.Fatalf("Read: %q, %v", buf[:n], err)
			}
			if _, err := c.Read(buf); err != io.EOF {
				t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
			}
			c.Close()
			if _, err := c.Read(buf); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Read of a closed connection: %v, want net.ErrClosed", err)
			}
			if _, err := c.Write(buf); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Write to a closed connection: %v, want net.ErrClosed", err)
			}
		})
	}
}

// TestBlockedWrite: a write that fills the socket waits for the poller
// until the peer reads, and then completes.
func TestBlockedWrite(t *testing.T) {
	cli, nc := tcpPair(t)
	c := rawconn.Wrap(nc)
	defer c.Close()
	const total = 64 << 20 // far past the socket buffers
	done := make(chan error)
	go func() {
		chunk := make([]byte, 60<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	n, err := io.CopyN(io.Discard, cli, total)
	if n != total || err != nil {
		t.Fatalf("the client read %d bytes: %v", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestOther: connections other than TCP and Unix sockets are returned as
// they are.
func TestOther(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := rawconn.Wrap(a); c != a {
		t.Fatalf("a pipe: Wrap returned %T", c)
	}
	tc := tls.Server(a, &tls.Config{})
	if c := rawconn.Wrap(tc); c != net.Conn(tc) {
		t.Fatalf("TLS: Wrap returned %T", c)
	}
}

// TestNoAllocs: a Read and a Write of a wrapped TCP connection allocate
// nothing (a closure made at each call cost 2 allocations each).
func TestNoAllocs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Wrap returns the connection itself here")
	}
	cli, nc := tcpPair(t)
	c := rawconn.Wrap(nc)
	defer c.Close()
	out, in := []byte("ping"), make([]byte, 4)
	n := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(out); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(cli, in); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Write(out); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, in); err != nil {
			t.Fatal(err)
		}
	})
	if n > 0 {
		t.Errorf("a Write and a Read: %.1f allocations, want none", n)
	}
}

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends.
func tcpPair(t *testing.T) (cli, srv net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cli, err = net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	srv, err = lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return cli, srv
}

// TestBlockedWakes: two Reads blocked on a silent peer, or two Writes on
// a full socket, both return when the deadline is moved to the past (with
// os.ErrDeadlineExceeded) and when the connection is closed (with
// net.ErrClosed), as net.TCPConn's do (checked too): the second caller,
// waiting for the first's turn, is not left behind. With Redis hung, the
// Redis client's bounds are deadlines and Close.
func TestBlockedWakes(t *testing.T) {
	for _, wrap := range []bool{true, false} {
		for _, dir := range []string{"read", "write"} {
			for _, how := range []string{"deadline", "close"} {
				name := dir + " " + how
				if !wrap {
					name += " (net.TCPConn)"
				}
				t.Run(name, func(t *testing.T) {
					_, nc := tcpPair(t) // the peer never reads nor writes
					c := nc
					if wrap {
						c = rawconn.Wrap(nc)
					}
					blockedWakes(t, c, dir == "write", how == "close")
				})
			}
		}
	}
}

func blockedWakes(t *testing.T, c net.Conn, write, closing bool) {
	t.Helper()
	done := make(chan error, 2)
	for range 2 {
		go func() {
			buf := make([]byte, 60<<10)
			for {
				var err error
				if write {
					_, err = c.Write(buf) // until the socket is full
				} else {
					_, err = c.Read(buf)
				}
				if err != nil {
					done <- err
					return
				}
			}
		}()
	}
	// Most likely both are waiting by then; the outcome must not depend
	// on it.
	time.Sleep(20 * time.Millisecond)
	want := os.ErrDeadlineExceeded
	switch {
	case closing:
		c.Close()
		want = net.ErrClosed
	case write:
		c.SetWriteDeadline(time.Now().Add(-time.Second))
	default:
		c.SetReadDeadline(time.Now().Add(-time.Second))
	}
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, want) {
				t.Errorf("got %v, want %v", err, want)
			}
		case <-time.After(10 * time.Second): // only to fail instead of hanging
			t.Fatal("a blocked caller did not return in 10 s")
		}
	}
}
