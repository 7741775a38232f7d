package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Every scenario has a name, a summary and flags of its own.
func ExampleScenarios() {
	for _, s := range sim.Scenarios() {
		fmt.Println(s.Name)
	}
	// Output:
	// brooker
	// objectstore
	// aimd
	// buckets
	// windows
	// overload
	// regions
}

// The object-store example: nine writes into a budget of five per tick.
// With backoff all nine land; retrying at once sends more than twice the
// requests and, in this run, drops one write after six 429s.
func ExampleLookup() {
	s, _ := sim.Lookup("objectstore")
	run := s.Flags(flag.NewFlagSet(s.Name, flag.ContinueOnError))
	res, err := run(sim.Options{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	res.WriteTable(os.Stdout, "csv")
	// Output:
	// strategy,requests,succeeded,dropped,elapsed_ms,calls,throttled
	// backoff,9,9,0,167.7,13,4
	// retry-immediately,9,8,1,126.4,29,21
}

// A scenario's options are its flags, parsed as "sluice sim brooker
// --clients 100 ..." parses them: at 100 clients, full jitter needs less
// than half the calls of exponential backoff without jitter.
func ExampleScenario_Flags() {
	s, _ := sim.Lookup("brooker")
	fs := flag.NewFlagSet(s.Name, flag.ContinueOnError)
	run := s.Flags(fs)
	if err := fs.Parse([]string{"--clients", "100", "--strategies", "exponential,full-jitter"}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := run(sim.Options{Seed: 1, Runs: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	res.WriteTable(os.Stdout, "csv")
	// Output:
	// strategy,clients,runs,mean_time_ms,mean_calls
	// exponential,100,10,61680.7,1839.5
	// full-jitter,100,10,4837.0,797.6
}

// A limiter of your own (here a fixed limit of 15 in flight) against
// sluice's, in the overload model, in real time.
func ExampleRealTime() {
	fixed := sim.OverloadContender{Name: "fixed-15", New: func(func() time.Time, uint64, func() int) sim.Admitter {
		return &fixedLimit{limit: 15}
	}}
	res, err := sim.RealTime(context.Background(), sim.RealTimeOptions{
		Model:  sim.IOModel{Capacity: 20},
		Warmup: time.Second, Phase: 2 * time.Second,
		Contenders: append(sim.OverloadContenders(), fixed),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res.WriteTable(os.Stdout, "table")
}

// fixedLimit admits up to limit requests in flight.
type fixedLimit struct{ limit, inflight int }

func (f *fixedLimit) Admit() (func(ok bool), bool) {
	if f.inflight >= f.limit {
		return nil, false
	}
	f.inflight++
	return func(bool) { f.inflight-- }, true
}

func (f *fixedLimit) Limit() int { return f.limit }
