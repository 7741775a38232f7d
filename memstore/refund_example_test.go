package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// A request whose work failed gives back what it was charged; a limit
// that changes keeps what was used: 3 used of 5/min stay 3 used of
// 50/min (47 left, as golang.org/x/time/rate's SetLimit keeps them).
func ExampleStore_refund() {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return clock }})
	defer store.Close()
	ctx := context.Background()
	req := ratelimit.Request{Key: "alice", Limit: ratelimit.PerMinute(5), Algorithm: ratelimit.TokenBucket, N: 1}

	for range 4 {
		store.Apply(ctx, req)
	}
	refund := req
	refund.Refund = true // the fourth request's upstream failed
	d, _ := store.Apply(ctx, refund)
	fmt.Println("after the refund:", d.Remaining)

	req.Limit, req.N = ratelimit.PerMinute(50), 0 // the rule is raised; a peek
	d, _ = store.Apply(ctx, req)
	fmt.Println("under 50/min:", d.Remaining)
	// Output:
	// after the refund: 2
	// under 50/min: 47
}
