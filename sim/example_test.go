package sim_test

import (
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// A Sim runs callbacks in virtual time order; ties run in the order they
// were scheduled.
func ExampleSim() {
	s := sim.New(1, 0)
	s.After(20*time.Millisecond, func() { fmt.Println(s.Now(), "second") })
	s.After(10*time.Millisecond, func() {
		fmt.Println(s.Now(), "first")
		s.After(10*time.Millisecond, func() { fmt.Println(s.Now(), "third") })
	})
	end := s.Run()
	fmt.Println("done at", end)
	// Output:
	// 10ms first
	// 20ms second
	// 20ms third
	// done at 20ms
}

// Seed 002's worked example: nine writes into a budget of five per tick.
// With backoff all nine land; retrying at once sends more than twice the
// requests and, in this run, drops one write after six 429s.
func ExampleObjectStore() {
	r, err := sim.ObjectStore(sim.ObjectStoreOptions{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range r.Rows {
		fmt.Printf("%-17s %d of %d landed, %d calls, under a second: %v\n",
			row.Strategy, row.Succeeded, row.Requests, row.Calls, row.Elapsed < time.Second)
	}
	// Output:
	// backoff           9 of 9 landed, 13 calls, under a second: true
	// retry-immediately 8 of 9 landed, 29 calls, under a second: true
}

// Brooker's finding at 100 clients: full jitter needs less than half the
// calls of exponential backoff without jitter.
func ExampleBrooker() {
	r, err := sim.Brooker(sim.BrookerOptions{
		Seed:       1,
		Runs:       10,
		Clients:    []int{100},
		Strategies: []string{"exponential", "full-jitter"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	exp, _ := r.Row("exponential", 100)
	full, _ := r.Row("full-jitter", 100)
	fmt.Println("full jitter needs less than half the calls:", full.MeanCalls < exp.MeanCalls/2)
	// Output:
	// full jitter needs less than half the calls: true
}

// Every scenario's table prints as aligned text, JSON or CSV.
func ExampleTable_Write() {
	t := sim.Table{
		Columns: []sim.Column{{Name: "strategy"}, {Name: "mean_calls", Prec: 1}},
		Rows:    [][]any{{"full-jitter", 796.25}, {"exponential", 1852.9}},
	}
	t.Write(os.Stdout, "json")
	t.Write(os.Stdout, "csv")
	// Output:
	// [
	//   {"strategy": "full-jitter", "mean_calls": 796.2},
	//   {"strategy": "exponential", "mean_calls": 1852.9}
	// ]
	// strategy,mean_calls
	// full-jitter,796.2
	// exponential,1852.9
}
