package storeurl_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/storeurl"
)

func ExampleOpen() {
	st, err := storeurl.Open(context.Background(), "memory", storeurl.Options{MaxKeys: 1 << 16})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	d, err := st.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(10), N: 1})
	if err != nil {
		panic(err)
	}
	ok, detail := st.Ready()
	fmt.Println(d.Allowed, d.Remaining, ok)
	fmt.Println(detail)
	// Output:
	// true 9 true
	// store memory: 1 keys of 65536
}
