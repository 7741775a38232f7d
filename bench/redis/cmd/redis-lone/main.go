// Command redis-lone measures what a lone fixed-window decision costs
// redis-server (issue 22 item 2): one caller, either as fast as it can
// (closed loop) or paced at a fixed rate, so that every call to Redis
// carries one decision. The contenders take turns in rounds on one
// redis-server: sluice's Redis store with scripts only (Options.ScriptOnly,
// what it did before the plain-command path), sluice's store as it is
// (plain commands for a lone fixed-window charge), that charge's
// transaction alone as the store sends it once its first hour is over
// (MULTI TIME EXISTS INCRBY PEXPIREAT NX PEXPIRETIME EXEC, go-redis), and
// envoyproxy/ratelimit's pattern (INCRBY + EXPIRE pipelined, go-redis). For each it reports
// redis-server's CPU a decision (/proc, before and after) and INFO
// commandstats' time a decision. See docs/bench-redis.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/bench/redis"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// limit is what sluice rls sends for the benchmark's rule (one million a
// second; the RLS adds one for its overflow mark).
var limit = ratelimit.Limit{Rate: 1000001, Period: time.Second}

type contender struct {
	name string
	op   func(ctx context.Context, key string) error
}

type result struct {
	decisions int64
	elapsed   time.Duration
	cpu       time.Duration
	stats     map[string][2]int64 // command: calls, usec
}

func main() {
	rate := flag.Int("rate", 0, "decisions a second, paced; 0: one caller as fast as it can")
	keys := flag.Int("keys", 10000, "distinct keys, picked at random (sluice rls's sweep uses 10000)")
	dur := flag.Duration("duration", 3*time.Second, "measurement time per contender per round")
	rounds := flag.Int("rounds", 3, "rounds; the contenders take turns, and each one's rounds are pooled")
	flag.Parse()
	ctx := context.Background()

	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	open := func(o redisstore.Options) *redisstore.Store {
		o.Timeout = 2 * time.Second
		s, err := redisstore.Open(ctx, "redis://"+srv.Addr, o)
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	before := open(redisstore.Options{ScriptOnly: true, Prefix: "b:"})
	defer before.Close()
	// The one-key form from the start (no compatibility window: no
	// instance of before shares the server).
	after := open(redisstore.Options{Prefix: "a:", CompatWindow: -1})
	defer after.Close()
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 1})
	defer rdb.Close()

	sluice := func(s *redisstore.Store) func(context.Context, string) error {
		return func(ctx context.Context, key string) error {
			_, err := s.Apply(ctx, ratelimit.Request{Key: key, Limit: limit, Algorithm: ratelimit.FixedWindow, N: 1})
			return err
		}
	}
	envoy := func(ctx context.Context, key string) error {
		// envoyproxy/ratelimit's fixed_cache_impl: the window's key carries
		// its start, INCRBY and EXPIRE go in one pipeline.
		now := time.Now().Unix()
		k := "e:" + key + "_" + strconv.FormatInt(now, 10)
		pipe := rdb.Pipeline()
		pipe.IncrBy(ctx, k, 1)
		pipe.Expire(ctx, k, time.Second)
		_, err := pipe.Exec(ctx)
		return err
	}
	period := limit.Period.Milliseconds()
	oneKey := func(ctx context.Context, key string) error {
		// The store's plain-command charge once its first hour is over
		// (EXISTS of the marker alone, no readable names of before), its
		// commands alone, pipelined by go-redis as envoy's are: the Redis
		// side of a decision without the store's client side.
		end := (time.Now().UnixMilli()/period + 1) * period
		k := "o:" + key
		_, err := rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Time(ctx)
			p.Exists(ctx, "om:"+key)
			p.IncrBy(ctx, k, 1)
			p.Do(ctx, "PEXPIREAT", k, end, "NX")
			p.PExpireTime(ctx, k)
			return nil
		})
		return err
	}
	contenders := []contender{
		{"sluice, scripts only (before)", sluice(before)},
		{"sluice, plain commands (after)", sluice(after)},
		{"sluice's transaction alone", oneKey},
		{"envoyproxy/ratelimit INCRBY+EXPIRE", envoy},
	}
	mode := "one caller, closed loop"
	if *rate > 0 {
		mode = fmt.Sprintf("one caller paced at %d/s", *rate)
	}
	fmt.Fprintf(os.Stderr, "%s, %d keys, %v per contender per round, %d rounds, redis-server %s (pid %d)\n", mode, *keys, *dur, *rounds, srv.Addr, srv.Pid())

	results := map[string][]result{}
	for r := range *rounds {
		order := slices.Clone(contenders)
		rand.New(rand.NewPCG(uint64(r), 11)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, c := range order {
			res, err := run(ctx, srv, c, *rate, *keys, *dur)
			if err != nil {
				log.Fatalf("%s: %v", c.name, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %-36s %7d decisions %6.0f/s  redis CPU %5.1f µs/decision  commands %5.2f µs/decision\n",
				r+1, c.name, res.decisions, float64(res.decisions)/res.elapsed.Seconds(), perDecision(res.cpu, res.decisions), commandUsec(res))
			results[c.name] = append(results[c.name], res)
		}
	}
	st := after.Stats()
	fmt.Fprintf(os.Stderr, "sluice (after): %d plain-command transactions, %d script calls\n", st.Commands, st.ScriptCalls)
	fmt.Println("| contender | decisions/s | redis-server CPU a decision | command time a decision | usec_per_call (INFO commandstats) |")
	fmt.Println("|---|---:|---:|---:|---|")
	for _, c := range contenders {
		rs := results[c.name]
		var m result
		m.stats = map[string][2]int64{}
		for _, x := range rs {
			m.decisions += x.decisions
			m.elapsed += x.elapsed
			m.cpu += x.cpu
			for k, v := range x.stats {
				s := m.stats[k]
				m.stats[k] = [2]int64{s[0] + v[0], s[1] + v[1]}
			}
		}
		var per []string
		names := make([]string, 0, len(m.stats))
		for k := range m.stats {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			v := m.stats[k]
			per = append(per, fmt.Sprintf("%s %.2f (%.2f a decision)", k, float64(v[1])/float64(max(1, v[0])), float64(v[0])/float64(max(1, m.decisions))))
		}
		fmt.Printf("| %s | %.0f | %.1f µs | %.2f µs | %s |\n", c.name, float64(m.decisions)/m.elapsed.Seconds(),
			perDecision(m.cpu, m.decisions), commandUsec(m), strings.Join(per, "; "))
	}
}

func perDecision(d time.Duration, n int64) float64 { return d.Seconds() * 1e6 / float64(max(1, n)) }

// commandUsec is the command time a decision: the top-level commands only
// (EXEC and EVALSHA include what they run, which commandstats also counts
// on its own lines).
func commandUsec(r result) float64 {
	var usec int64
	_, tx := r.stats["exec"]
	_, script := r.stats["evalsha"]
	for k, v := range r.stats {
		if tx || script {
			switch k {
			case "exec", "multi", "evalsha", "eval":
				usec += v[1]
			}
			continue
		}
		usec += v[1]
	}
	return float64(usec) / float64(max(1, r.decisions))
}

// run measures c for d: a fresh keyspace and statistics, then one caller.
func run(ctx context.Context, srv *redistest.Server, c contender, rate, keys int, d time.Duration) (result, error) {
	if _, err := srv.Do("FLUSHALL"); err != nil {
		return result{}, err
	}
	// Warm up (scripts loaded, connections up, the clock estimate).
	rng := rand.New(rand.NewPCG(1, uint64(rate)))
	for range 50 {
		if err := c.op(ctx, "k"+strconv.Itoa(rng.IntN(keys))); err != nil {
			return result{}, err
		}
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		return result{}, err
	}
	cpu0, err := redis.ProcCPU(srv.Pid())
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	end := start.Add(d)
	var n int64
	var interval time.Duration
	if rate > 0 {
		interval = time.Second / time.Duration(rate)
	}
	next := start
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		if interval > 0 {
			if wait := next.Sub(now); wait > 0 {
				time.Sleep(wait)
			} else if -wait > 10*interval {
				next = now // behind: no burst to catch up
			}
			next = next.Add(interval)
		}
		if err := c.op(ctx, "k"+strconv.Itoa(rng.IntN(keys))); err != nil {
			return result{}, err
		}
		n++
	}
	elapsed := time.Since(start)
	cpu1, err := redis.ProcCPU(srv.Pid())
	if err != nil {
		return result{}, err
	}
	v, err := srv.Do("INFO", "commandstats")
	if err != nil {
		return result{}, err
	}
	info, _ := v.(string)
	return result{decisions: n, elapsed: elapsed, cpu: cpu1 - cpu0, stats: parseStats(info)}, nil
}

// parseStats reads INFO commandstats: "cmdstat_incrby:calls=3,usec=7,…".
func parseStats(info string) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found || name == "config" || name == "info" || name == "flushall" {
			continue
		}
		var calls, usec int64
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[name] = [2]int64{calls, usec}
	}
	return out
}
