package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// A full store forgets what costs least, and refuses a new key rather than
// forget a denial: the caller's failure policy then decides.
func ExampleStore_Stats() {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return clock }, MaxKeys: 16, SweepInterval: -1})
	defer store.Close()
	ctx := context.Background()
	lim := ratelimit.PerMinute(10)

	// Sixteen callers, each over its limit.
	for i := range 16 {
		store.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("caller-", i), Limit: lim, N: 10})
	}
	_, err := store.Apply(ctx, ratelimit.Request{Key: "newcomer", Limit: lim, N: 1})
	fmt.Println(errors.Is(err, memstore.ErrFull))

	// A minute later every caller is back to a full quota: forgetting one
	// changes nothing.
	clock = clock.Add(time.Minute)
	d, err := store.Apply(ctx, ratelimit.Request{Key: "newcomer", Limit: lim, N: 1})
	fmt.Println(d.Allowed, err)
	fmt.Printf("%+v\n", store.Stats())
	// Output:
	// true
	// true <nil>
	// {Keys:16 MaxKeys:16 Evictions:0 Refusals:1 JournalRecords:0 JournalDropped:0 JournalErrors:0}
}
