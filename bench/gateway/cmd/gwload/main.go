// Command gwload is bench/gateway's load generator as a program of its
// own, so that the load runs in a process apart from the proxies it
// measures: one measurement of package loadgen, its Result as JSON on
// standard output.
//
//	gwload -url http://127.0.0.1:8080/hello -c 32 -d 2s -warmup 200ms -pid proxy=1234 -pid upstream=1200
//	gwload -url http://127.0.0.1:8080/hello -c 64 -d 2s -rate 2000      # open loop at 2000 req/s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/bench/gateway/loadgen"
)

// pids is a repeatable -pid name=pid flag.
type pids map[string]int

func (p pids) String() string { return fmt.Sprint(map[string]int(p)) }

func (p pids) Set(s string) error {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=pid, got %q", s)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("bad pid in %q", s)
	}
	p[name] = n
	return nil
}

func main() {
	var cfg loadgen.Config
	ps := pids{}
	flag.StringVar(&cfg.URL, "url", "", "the URL to GET")
	flag.IntVar(&cfg.Clients, "c", 32, "keep-alive clients, each from its own loopback address")
	flag.DurationVar(&cfg.Duration, "d", 0, "the measured window (required)")
	flag.DurationVar(&cfg.Warmup, "warmup", 0, "load before the window, not counted")
	flag.Float64Var(&cfg.Rate, "rate", 0, "open loop at this many requests/s (0: closed loop)")
	flag.BoolVar(&cfg.SameSource, "same-source", false, "every client from 127.0.0.1")
	flag.Var(ps, "pid", "name=pid: a process whose CPU time to report (repeatable)")
	flag.Parse()
	if cfg.URL == "" || cfg.Duration <= 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: gwload -url URL -d DURATION [-c N] [-warmup D] [-rate R] [-pid name=pid]...")
		os.Exit(2)
	}
	cfg.PIDs = ps
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := loadgen.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gwload:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "gwload:", err)
		os.Exit(1)
	}
}
