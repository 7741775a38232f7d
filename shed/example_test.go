package shed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// A process of 10 workers, all busy: after two minutes above the 0.8
// threshold, test-mode traffic and GETs are shed entirely, POSTs in part,
// and critical requests not at all.
func ExampleUtilization() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u, err := shed.NewUtilization(shed.UtilizationOptions{
		Capacity: 10, // Threshold 0.8, Ramp 120 s, classes test, get, post, critical
		Now:      func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	critical, _ := u.Classes().Lookup("critical")
	for range 10 {
		u.Acquire(critical) // ten long requests keep every worker busy
	}
	for range 121 {
		now = now.Add(time.Second)
		if u.Acquire(critical) {
			u.Release()
		}
	}
	s := u.Stats()
	fmt.Printf("utilization %.2f, amount shed %.2f\n", s.Utilization, s.Amount)
	for _, name := range u.Classes().Names() {
		c, _ := u.Classes().Lookup(name)
		fmt.Printf("%-8s %3.0f%% shed\n", name, 100*u.ShedFraction(c))
	}
	// Output:
	// utilization 1.00, amount shed 0.63
	// test     100% shed
	// get      100% shed
	// post      53% shed
	// critical   0% shed
}

// Stripe's sketch divides integers: a shedder at rest at 28% moves by
// -28/120 a second, which is -1 in Ruby. Step divides reals.
func ExampleStep() {
	next := shed.Step(28, 0, time.Second, 120*time.Second)
	fmt.Printf("%.3f\n", next-28)
	// Output: -0.233
}

// A fleet cap of 10 with 20% reserved for critical requests: GETs fill 8
// slots, critical requests the other 2.
func ExampleFleet() {
	ctx := context.Background()
	store := inflight.NewMemory(inflight.MemoryOptions{}) // a Redis store shares it across a fleet
	defer store.Close()
	f, _ := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 10, Reserved: 0.2})
	get, _ := f.Classes().Lookup("get")
	critical, _ := f.Classes().Lookup("critical")

	admitted := map[string]int{}
	for range 12 { // a flood of GETs first
		if _, d, _ := f.Acquire(ctx, get); d.Allowed {
			admitted["get"]++
		}
	}
	for range 5 {
		if _, d, _ := f.Acquire(ctx, critical); d.Allowed {
			admitted["critical"]++
		}
	}
	fmt.Println(admitted)
	// Output: map[critical:2 get:8]
}
