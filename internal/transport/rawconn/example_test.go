package rawconn_test

import (
	"fmt"
	"io"
	"log"
	"net"

	"github.com/sluicehq/sluice/internal/transport/rawconn"
)

// Wrap a connection once dialed or accepted; read and write it as any
// net.Conn.
func ExampleWrap() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		c = rawconn.Wrap(c)
		defer c.Close()
		io.Copy(c, c) // echo
	}()
	nc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	c := rawconn.Wrap(nc)
	defer c.Close()
	fmt.Fprint(c, "hello")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(buf))
	// Output: hello
}
