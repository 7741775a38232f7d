package redisinflight_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// Every instance of a fleet shares one user's 2 slots through Redis. The
// example starts its own redis-server; in production the client points at
// your Redis or Redis Cluster.
func ExampleNew() {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	store, err := redisinflight.New(client, redisinflight.Options{
		OnError: ratelimit.FailLocal, // Redis down: each instance limits alone
		Timeout: time.Second,         // default 100 ms
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	req := inflight.Request{Key: "user:42", Cap: 2, TTL: 30 * time.Second}
	var leases []inflight.Lease
	for range 3 {
		l, d, err := store.Acquire(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.InFlight, "of", d.Cap)
		if d.Allowed {
			leases = append(leases, l)
		}
	}
	for _, l := range leases {
		store.Release(ctx, l) // when the request ends
	}
	n, _ := store.Peek(ctx, "user:42")
	fmt.Println("in flight after the releases:", n)
	// Output:
	// true 1 of 2
	// true 2 of 2
	// false 2 of 2
	// in flight after the releases: 0
}

// A long job renews its lease while it runs, well within the TTL; a
// renewal that fails with inflight.ErrExpired means the slot is lost.
func ExampleStore_Renew() {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := redisinflight.New(client, redisinflight.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	l, _, _ := store.Acquire(ctx, inflight.Request{Key: "export", Cap: 1, TTL: 10 * time.Second})
	l, err = store.Renew(ctx, l, 10*time.Second)
	fmt.Println("renewed:", err == nil, time.Until(l.Expiry) > 9*time.Second)
	store.Release(ctx, l)
	_, err = store.Renew(ctx, l, 10*time.Second)
	fmt.Println("after release:", err)
	// Output:
	// renewed: true true
	// after release: inflight: lease expired or released
}

// Script returns the Lua the store runs, for review.
func ExampleScript() {
	src := redisinflight.Script("acquire")
	fmt.Println(strings.Contains(src, "ZREMRANGEBYSCORE"), strings.Contains(src, "ZADD"))
	fmt.Printf("%q\n", redisinflight.Script("nonesuch"))
	// Output:
	// true true
	// ""
}
