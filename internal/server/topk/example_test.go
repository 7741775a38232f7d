package topk_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/server/topk"
)

// Who is denied most: one flooding caller among a few others.
func Example() {
	tk := topk.New(topk.Options{Capacity: 16})
	for range 100 {
		tk.Record("ip:203.0.113.7")
	}
	for _, k := range []string{"user:alice", "user:bob", "user:alice"} {
		tk.Record(k)
	}
	for _, e := range tk.Top(2) {
		fmt.Println(e.Key, e.Count, "±", e.Err)
	}
	// Output:
	// ip:203.0.113.7 100 ± 0
	// user:alice 2 ± 0
}
