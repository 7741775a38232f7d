package pin_test

import (
	"fmt"

	"github.com/sluicehq/sluice/bench/internal/pin"
)

// On a two-CPU machine, redis-server gets CPU 1 and the load generator
// keeps CPU 0.
func ExampleSplit() {
	l, err := pin.Split([]int{0, 1}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("load generator:", pin.Format(l.Self), "redis-server:", pin.Format(l.Others[0]))
	_, err = pin.Split([]int{0}, 1)
	fmt.Println(err)
	// Output:
	// load generator: 0 redis-server: 1
	// pin: 1 CPUs cannot give 1 processes a CPU each and keep one for the load generator
}
