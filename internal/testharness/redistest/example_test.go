package redistest_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// A server outside a test (a benchmark's main, say) is started with
// StartServer and must be closed. Tests use Start, Shared or StartCluster,
// which stop their servers themselves.
func ExampleStartServer() {
	s, err := redistest.StartServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	reply, err := s.Do("PING")
	fmt.Println(reply, err)
	// Output: PONG <nil>
}
