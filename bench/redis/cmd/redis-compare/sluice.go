package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/redis"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

var (
	pipelines = flag.String("pipelines", "", "comma-separated redisstore Options.Pipeline values to compare (GCRA only); empty: the default")
	maxBatch  = flag.Int("maxbatch", 0, "redisstore Options.MaxBatch (0: default)")
)

func open(ctx context.Context, addr string, pipeline int) *redisstore.Store {
	// A long timeout: the comparison is of throughput, and redis_rate has
	// none shorter than go-redis's 3 s read timeout.
	s, err := redisstore.Open(ctx, "redis://"+addr, redisstore.Options{Pipeline: pipeline, MaxBatch: *maxBatch, Timeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	return s // the process exits when done; the store lives until then
}

func sluiceContenders(ctx context.Context, addr string) []contender {
	if *pipelines != "" {
		var out []contender
		for _, f := range strings.Split(*pipelines, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				log.Fatal(err)
			}
			out = append(out, contender{fmt.Sprintf("sluice redisstore gcra pipeline %d", p), redis.Sluice(open(ctx, addr, p), ratelimit.GCRA, fmt.Sprintf("sp%d:", p))})
		}
		return out
	}
	s := open(ctx, addr, 0)
	return []contender{
		{"sluice redisstore gcra", redis.Sluice(s, ratelimit.GCRA, "sg:")},
		{"sluice redisstore fixed_window", redis.Sluice(s, ratelimit.FixedWindow, "sf:")},
	}
}
