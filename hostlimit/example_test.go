package hostlimit_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/hostlimit"
)

func Example() {
	// 5 requests a second and 2 in flight per host; without Rate, AIMD
	// would find each host's rate.
	l := hostlimit.New(hostlimit.Options{Rate: 5, Concurrency: 2})
	ctx := context.Background()
	p, err := l.Acquire(ctx, "api.example.com")
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... send the request, then say what came back:
	p.Done(hostlimit.Feedback{Signal: adaptive.Success})
	for _, h := range l.Hosts() {
		fmt.Printf("%s %.0f/s in flight %d\n", h.Host, h.Rate, h.InFlight)
	}
	// Output: api.example.com 5/s in flight 0
}
