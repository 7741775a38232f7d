package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Prefetch mode for a hot key: 100,000 events an hour shared by up to 10
// instances. The key's largest slice is 1% of the capacity over 10
// instances, 100 events. The first MinSlice (8) events of the key go to
// Redis one by one; then the instance takes slices as large as what it saw
// in the TTL (8, 16, 32 here), up to 100, and decides from them without
// Redis. Close gives back what it did not spend.
func ExampleNewPrefetch() {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	store, err := redisstore.Open(ctx, "redis://"+srv.Addr, redisstore.Options{Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	prefetched, err := redisstore.NewPrefetch(store, redisstore.PrefetchOptions{TTL: time.Minute})
	if err != nil {
		log.Fatal(err)
	}

	lim := ratelimit.PerHour(100000)
	fmt.Println("largest slice:", prefetched.MaxSlice(ratelimit.GCRA, lim))
	for range 50 {
		if _, err := prefetched.Apply(ctx, ratelimit.Request{Key: "tenant-7", Limit: lim, N: 1}); err != nil {
			log.Fatal(err)
		}
	}
	st := prefetched.Stats()
	fmt.Println("exact:", st.Exact, "slices:", st.Takes, "local:", st.Local)
	prefetched.Close()
	d, _ := store.Apply(ctx, ratelimit.Request{Key: "tenant-7", Limit: lim}) // a peek
	fmt.Println("used in redis after Close:", lim.Burst-d.Remaining <= 50)
	// Output:
	// largest slice: 100
	// exact: 7 slices: 3 local: 40
	// used in redis after Close: true
}
