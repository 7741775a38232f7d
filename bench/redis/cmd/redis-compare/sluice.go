package main

import (
	"context"
	"flag"
	"log"
	"time"

	"github.com/sluicehq/sluice/bench/redis"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

var (
	pipeline = flag.Int("pipeline", 0, "redisstore Options.Pipeline (0: default)")
	maxBatch = flag.Int("maxbatch", 0, "redisstore Options.MaxBatch (0: default)")
)

func sluiceContenders(ctx context.Context, addr string) []contender {
	s, err := redisstore.Open(ctx, "redis://"+addr, redisstore.Options{Pipeline: *pipeline, MaxBatch: *maxBatch, Timeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	// The process exits when done; the store lives until then.
	return []contender{
		{"sluice redisstore gcra", redis.Sluice(s, ratelimit.GCRA, "sg:")},
		{"sluice redisstore fixed_window", redis.Sluice(s, ratelimit.FixedWindow, "sf:")},
	}
}
