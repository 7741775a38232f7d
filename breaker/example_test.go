package breaker_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/breaker"
)

func Example() {
	b := breaker.New(breaker.Options{
		Threshold: 2,
		Backoff:   backoff.Constant(time.Second),
	})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Two 429s in a row, the second asking for 30 s.
	b.Record(now, false, breaker.Failure, 0)
	b.Record(now, false, breaker.Failure, 30*time.Second)
	_, err := b.Allow(now.Add(10 * time.Second))
	fmt.Println(err)
	probe, err := b.Allow(now.Add(30 * time.Second))
	fmt.Println(probe, err, b.State(now.Add(30*time.Second)))
	b.Record(now.Add(31*time.Second), probe, breaker.Success, 0)
	fmt.Println(b.State(now.Add(31 * time.Second)))
	// Output:
	// breaker: open for another 20s
	// true <nil> half-open
	// closed
}
