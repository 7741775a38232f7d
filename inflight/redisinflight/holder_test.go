package redisinflight_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
)

// The child process of TestCrashedHolder: the test binary run again with
// these variables set.
const (
	holderEnv    = "REDISINFLIGHT_HOLDER" // the Redis address
	holderPrefix = "REDISINFLIGHT_PREFIX" // the store's prefix
	holderTTL    = 2 * time.Second        // the leases' TTL
	holderRenew  = 200 * time.Millisecond // how often lease B is renewed
	holderKey    = "crashed-holder"       // the key, with Cap 2
	holderReady  = "holding A (never renewed) and B (renewed)"
)

// holder takes two leases on holderKey with Redis's clock: A, never renewed
// (a request whose process hangs), and B, renewed every holderRenew (a
// long job), prints holderReady, and renews B until it is killed.
func holder(addr string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(2)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fail(err)
	}
	s, err := redisinflight.New(client, redisinflight.Options{Prefix: os.Getenv(holderPrefix), Timeout: 10 * time.Second})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	req := inflight.Request{Key: holderKey, Cap: 2, TTL: holderTTL}
	if _, d, err := s.Acquire(ctx, req); err != nil || !d.Allowed {
		fail(fmt.Errorf("lease A: %+v, %v", d, err))
	}
	b, d, err := s.Acquire(ctx, req)
	if err != nil || !d.Allowed {
		fail(fmt.Errorf("lease B: %+v, %v", d, err))
	}
	fmt.Println(holderReady)
	for {
		time.Sleep(holderRenew)
		if b, err = s.Renew(ctx, b, holderTTL); err != nil {
			fail(fmt.Errorf("renew B: %v", err))
		}
	}
}
