package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// KeySpace is the number of distinct keys the contenders spread their calls
// over, and BenchLimit the limit each key gets: with 64 callers most calls
// are admitted, as in a service that is not under attack.
var KeySpace = 10000

// BenchLimit is the limit every contender applies to each key.
var BenchLimit = ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 100}

func key(prefix string, rng *rand.Rand) string {
	return prefix + strconv.Itoa(rng.IntN(KeySpace))
}

// RedisRate is go-redis/redis_rate's Allow (GCRA in Lua, EVALSHA per call).
func RedisRate(rdb *goredis.Client, prefix string) Op {
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.Limit{Rate: int(BenchLimit.Rate), Burst: int(BenchLimit.Burst), Period: BenchLimit.Period}
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		res, err := l.Allow(ctx, key(prefix, rng), lim)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}
}

// EnvoyFixedWindow is envoyproxy/ratelimit's Redis pattern: for each
// decision, INCRBY the window's key and EXPIRE it, pipelined in one round
// trip, and compare the count with the limit in the client.
func EnvoyFixedWindow(rdb *goredis.Client, prefix string) Op {
	period := int64(BenchLimit.Period / time.Second)
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		now := time.Now().Unix()
		k := key(prefix, rng) + "_" + strconv.FormatInt(now/period*period, 10)
		pipe := rdb.Pipeline()
		incr := pipe.IncrBy(ctx, k, 1)
		pipe.Expire(ctx, k, BenchLimit.Period)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, err
		}
		return incr.Val() <= BenchLimit.Rate, nil
	}
}

// GCRAScript returns the source of redisstore's GCRA script (the one the
// store loads, its shared head included), for the client-library
// comparison.
func GCRAScript() (string, error) {
	return redisstore.Script(ratelimit.GCRA), nil
}

func gcraArgs() []string {
	lim := BenchLimit.Normalize()
	t := int64(lim.Interval())
	// ARGV: min expiry (ms, unused), "0" (the server's clock), one
	// (inc, lim, T, τ) spec: cost 1 adds t to the TAT, admitted while the
	// backlog is at most τ − t; T and τ say the limit the state is kept
	// under.
	tau := lim.Burst * t
	// Then the tail the script's upgrade step reads (lua/legacy.lua): no
	// readable name for the one request (""), the prefix (unused), the
	// shape's tag and the number of requests.
	return []string{"1", "0", "1", strconv.FormatInt(t, 10), strconv.FormatInt(tau-t, 10), strconv.FormatInt(t, 10), strconv.FormatInt(tau, 10),
		"", "", "t", "1"}
}

// allowedReply reads the script's reply for one request: the backlog,
// negative when denied.
func allowedReply(v []int64) (bool, error) {
	if len(v) < 1 {
		return false, fmt.Errorf("short reply %v", v)
	}
	return v[0] >= 0, nil
}

// GoRedisScript runs redisstore's GCRA script through go-redis v9
// (EVALSHA, one round trip per call on a pooled connection).
func GoRedisScript(rdb *goredis.Client, src, prefix string) Op {
	script := goredis.NewScript(src)
	args := gcraArgs()
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		v, err := script.Run(ctx, rdb, []string{key(prefix, rng)}, argv...).Int64Slice()
		if err != nil {
			return false, err
		}
		return allowedReply(v)
	}
}

// RueidisScript runs redisstore's GCRA script through rueidis, whose
// concurrent calls share connections by automatic pipelining.
func RueidisScript(c rueidis.Client, src, prefix string) Op {
	script := rueidis.NewLuaScript(src)
	args := gcraArgs()
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		v, err := script.Exec(ctx, c, []string{key(prefix, rng)}, args).AsIntSlice()
		if err != nil {
			return false, err
		}
		return allowedReply(v)
	}
}

// FixedWindowPipe is EnvoyFixedWindow's INCRBY and PEXPIRE pipelined
// through rueidis (sluice's client library) as one DoMulti: what a
// fixed-window fast path in redisstore would send, so that its Redis cost
// is measured apart from the client library's.
func FixedWindowPipe(c rueidis.Client, prefix string) Op {
	period := BenchLimit.Period.Milliseconds()
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		now := time.Now().UnixMilli()
		k := key(prefix, rng) + "_" + strconv.FormatInt(now/period*period, 10)
		rs := c.DoMulti(ctx, c.B().Incrby().Key(k).Increment(1).Build(), c.B().Pexpire().Key(k).Milliseconds(period).Build())
		n, err := rs[0].AsInt64()
		if err != nil {
			return false, err
		}
		if err := rs[1].Error(); err != nil {
			return false, err
		}
		return n <= BenchLimit.Rate, nil
	}
}

// minimalWindow is the least a fixed-window script can do: INCRBY, and
// PEXPIRE when the key is new.
const minimalWindow = `local c = redis.call('INCRBY', KEYS[1], ARGV[1])
if c == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return c`

// FixedWindowScript is the same fixed window as one EVALSHA of the
// minimal script (minimalWindow): one command for Redis instead of two, a
// script call's overhead instead of a second command's.
func FixedWindowScript(c rueidis.Client, prefix string) Op {
	script := rueidis.NewLuaScript(minimalWindow)
	period := BenchLimit.Period.Milliseconds()
	ms := strconv.FormatInt(period, 10)
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		now := time.Now().UnixMilli()
		k := key(prefix, rng) + "_" + strconv.FormatInt(now/period*period, 10)
		n, err := script.Exec(ctx, c, []string{k}, []string{"1", ms}).AsInt64()
		if err != nil {
			return false, err
		}
		return n <= BenchLimit.Rate, nil
	}
}

// Sluice is sluice's redisstore deciding alg for BenchLimit.
func Sluice(s ratelimit.Store, alg ratelimit.Algorithm, prefix string) Op {
	return func(ctx context.Context, rng *rand.Rand) (bool, error) {
		d, err := s.Apply(ctx, ratelimit.Request{Key: key(prefix, rng), Limit: BenchLimit, Algorithm: alg, N: 1})
		return d.Allowed, err
	}
}
