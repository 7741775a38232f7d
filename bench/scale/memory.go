package scale

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rules"
)

// SeedLimit is the seed's exercise: 1,000 requests a minute per key with a
// burst of 200.
var SeedLimit = ratelimit.Limit{Rate: 1000, Period: time.Minute, Burst: 200}

// SeedKeys is the seed's number of active keys, and SeedEstimate its
// estimate of their memory: "100M keys × 2 values × 8 bytes = ~1.6 GB".
const (
	SeedKeys     = 100_000_000
	SeedEstimate = 1.6e9
)

// Algorithms are the algorithms Memory measures, in the order reported.
var Algorithms = []ratelimit.Algorithm{
	ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.LeakyBucket,
	ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog,
}

// SeedRules returns the rule file of the seed's limit under algorithm a:
// domain "api", one rule per authenticated user (the gateway's identity
// action sends user=<id>), 1,000 a minute with a burst of 200.
func SeedRules(a ratelimit.Algorithm) string {
	burst := ""
	switch a {
	case ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.LeakyBucket:
		burst = ", burst: 200"
	}
	return fmt.Sprintf("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {name: per-user, algorithm: %s, unit: minute, requests_per_unit: 1000%s}\n", a, burst)
}

// UserID returns the i-th user ID of a run: 16 hexadecimal digits, the
// shape of a database or API key ID, spread so that consecutive IDs share
// no prefix.
func UserID(i int) string {
	x := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 29
	return fmt.Sprintf("%016x", x)
}

// MemoryOptions configures Memory.
type MemoryOptions struct {
	// Addr is the redis-server (host:port) to fill. It is flushed
	// (FLUSHALL SYNC) before and after: give Memory a server of its own.
	Addr      string
	Algorithm ratelimit.Algorithm
	// Keys is the number of distinct keys written; 0 means 1,000,000.
	Keys int
	// Hits is the requests per key (each admitted); 0 means 1. Only the
	// sliding log's state grows with it (one entry per request).
	Hits int
	// Callers is the number of goroutines applying requests at once (the
	// store batches them into script calls); 0 means 256.
	Callers int
	// Samples is the number of keys MEMORY USAGE is asked about; 0 means
	// 1000.
	Samples int
	// ServerClock runs the store on Redis's clock (no Options.Now), as in
	// production, with the rule's period a day so that keys outlive the
	// run: a fixed window then keeps its count in its one key, as an
	// integer expiring at the window's end (the period changes no byte).
	ServerClock bool
	// Layout is the store's (redisstore.Options.Layout); the packed one
	// with its default PackedBuckets.
	Layout redisstore.Layout
}

// MemoryResult is what Memory measured.
type MemoryResult struct {
	Algorithm ratelimit.Algorithm
	Layout    redisstore.Layout
	Keys      int
	Hits      int
	Elapsed   time.Duration // writing the keys
	// Before and After are INFO memory's used_memory before the first
	// request and after the last (the scripts already loaded).
	Before, After int64
	// DBKeys is DBSIZE after writing (every key must still be there).
	DBKeys int64
	// Usage is MEMORY USAGE (SAMPLES 0) of the sampled keys: mean, min
	// and max bytes.
	UsageMean       float64
	UsageMin        int64
	UsageMax        int64
	RuleKey         string     // the rules engine's key of the first user
	Example         []RedisKey // the Redis keys holding its state
	ExpiresCount    int64      // keys with an expiry (INFO keyspace)
	RSS             int64      // used_memory_rss after
	AllocatorFrag   float64
	ScriptCalls     int64
	DecisionsPerSec float64
}

// RedisKey is one Redis key of a limiter key's state.
type RedisKey struct {
	Name       string
	Encoding   string // OBJECT ENCODING
	ValueBytes int64  // STRLEN, or for a list the sum of its entries' lengths
	Usage      int64  // MEMORY USAGE … SAMPLES 0
}

// RedisKeysPerKey is DBSIZE over the limiter keys written.
func (r MemoryResult) RedisKeysPerKey() float64 { return float64(r.DBKeys) / float64(r.Keys) }

// PerKey is the used_memory growth per key: the figure to project from.
func (r MemoryResult) PerKey() float64 { return float64(r.After-r.Before) / float64(r.Keys) }

// Projected is PerKey times n keys, in bytes.
func (r MemoryResult) Projected(n int) float64 { return r.PerKey() * float64(n) }

// Memory writes o.Keys keys through a redisstore.Store, each key as the
// rules engine names it for the seed's rule (SeedRules) under o.Algorithm,
// and measures what they cost redis-server: INFO memory's used_memory
// before and after, and MEMORY USAGE of a sample.
//
// The store runs with Options.Now set (the process's clock), so that keys
// live at least redisstore.MinTTLWithNow (10 minutes) instead of expiring
// as soon as their state is back to full (the first whole second after, on
// Redis's clock: within a second for a bucket that took one request).
// What a key costs is the same either way: the value has the same bytes
// and the key the same expiry entry (PX rather than EXAT).
func Memory(ctx context.Context, o MemoryOptions) (MemoryResult, error) {
	if o.Keys <= 0 {
		o.Keys = 1_000_000
	}
	if o.Hits <= 0 {
		o.Hits = 1
	}
	if o.Callers <= 0 {
		o.Callers = 256
	}
	if o.Samples <= 0 {
		o.Samples = 1000
	}
	o.Samples = min(o.Samples, o.Keys)
	res := MemoryResult{Algorithm: o.Algorithm, Keys: o.Keys, Hits: o.Hits, Layout: o.Layout}

	cfg, err := rules.Parse("seed.yaml", []byte(SeedRules(o.Algorithm)))
	if err != nil {
		return res, err
	}
	entries := func(i int) []rules.Entry { return []rules.Entry{{Key: "user", Value: UserID(i)}} }
	rule := cfg.Match(entries(0))
	if rule == nil {
		return res, errors.New("scale: the seed rule matches no user")
	}
	if rule.Algorithm != o.Algorithm {
		return res, fmt.Errorf("scale: the rule's algorithm is %v, want %v", rule.Algorithm, o.Algorithm)
	}

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{o.Addr}, DisableCache: true,
		ConnWriteTimeout: 30 * time.Second})
	if err != nil {
		return res, err
	}
	defer client.Close()
	do := func(args ...string) rueidis.RedisResult {
		return client.Do(ctx, client.B().Arbitrary(args[0]).Args(args[1:]...).Build())
	}
	if err := do("FLUSHALL", "SYNC").Error(); err != nil {
		return res, fmt.Errorf("scale: FLUSHALL: %w", err)
	}
	defer do("FLUSHALL", "SYNC")

	sopts := redisstore.Options{Now: time.Now, Timeout: 10 * time.Second, Layout: o.Layout}
	if o.ServerClock {
		sopts.Now, sopts.CompatWindow = nil, -1 // the one key from the start
		rule.Limit.Period = 24 * time.Hour
	}
	store, err := redisstore.New(ctx, client, sopts)
	if err != nil {
		return res, err
	}
	defer store.Close()
	// One request on a key of its own, so the scripts are loaded and the
	// connection's buffers grown before the baseline; then that key goes.
	warm := ratelimit.Request{Key: "warm", Limit: rule.Limit, Algorithm: rule.Algorithm, N: 1}
	if _, err := store.Apply(ctx, warm); err != nil {
		return res, fmt.Errorf("scale: warm-up: %w", err)
	}
	if err := store.Reset(ctx, "warm"); err != nil {
		return res, err
	}
	if res.Before, err = usedMemory(ctx, client); err != nil {
		return res, fmt.Errorf("scale: INFO memory before: %w", err)
	}

	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range o.Callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 128)
			for {
				j := int(next.Add(1) - 1)
				if j >= o.Keys*o.Hits || ctx.Err() != nil {
					return
				}
				// Hit h of every key before hit h+1 of any, so a key's
				// entries (the log) are spread over the run.
				i := j % o.Keys
				buf = rule.AppendKey(buf[:0], entries(i))
				d, err := store.Apply(ctx, ratelimit.Request{Key: string(buf), Limit: rule.Limit, Algorithm: rule.Algorithm, N: 1})
				if err == nil && !d.Allowed {
					err = fmt.Errorf("scale: key %d hit %d denied", i, j/o.Keys+1)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(o.Keys * o.Hits))
					return
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	st := store.Stats()
	res.ScriptCalls = int64(st.ScriptCalls)
	res.DecisionsPerSec = float64(o.Keys*o.Hits) / res.Elapsed.Seconds()
	runtime.GC()
	if res.After, err = usedMemory(ctx, client); err != nil {
		return res, fmt.Errorf("scale: INFO memory after: %w", err)
	}
	if res.DBKeys, err = do("DBSIZE").AsInt64(); err != nil {
		return res, fmt.Errorf("scale: DBSIZE: %w", err)
	}
	stored := res.DBKeys
	if _, _, packed := store.Field(o.Algorithm, "warm"); packed {
		if stored, err = packedFields(ctx, client); err != nil {
			return res, fmt.Errorf("scale: counting fields: %w", err)
		}
	}
	if int(stored) < o.Keys {
		return res, fmt.Errorf("scale: %d keys (or packed fields) after writing %d keys (did keys expire?)", stored, o.Keys)
	}
	info, err := do("INFO", "memory").ToString()
	if err != nil {
		return res, err
	}
	res.RSS, _ = strconv.ParseInt(infoField(info, "used_memory_rss"), 10, 64)
	res.AllocatorFrag, _ = strconv.ParseFloat(infoField(info, "allocator_frag_ratio"), 64)
	ks, err := do("INFO", "keyspace").ToString()
	if err != nil {
		return res, err
	}
	res.ExpiresCount = keyspaceExpires(ks)

	// MEMORY USAGE of the state of keys spread over the run: every Redis
	// key that holds part of it.
	step := max(1, o.Keys/o.Samples)
	var sum int64
	var n int
	res.UsageMin = 1 << 62
	for i := 0; i < o.Keys && n < o.Samples; i += step {
		ks, err := stateKeys(ctx, client, store, string(rule.AppendKey(nil, entries(i))))
		if err != nil {
			return res, fmt.Errorf("scale: sampling user %d: %w", i, err)
		}
		if len(ks) == 0 {
			return res, fmt.Errorf("scale: user %d has no state in Redis", i)
		}
		var u int64
		for _, k := range ks {
			u += k.Usage
		}
		if i == 0 {
			res.Example = ks
		}
		sum += u
		n++
		res.UsageMin = min(res.UsageMin, u)
		res.UsageMax = max(res.UsageMax, u)
	}
	res.UsageMean = float64(sum) / float64(n)
	res.RuleKey = string(rule.AppendKey(nil, entries(0)))
	return res, nil
}

// stateKeys returns the Redis keys that hold key's state in store, as it
// lays them out: one key per state shape (buckets, window counters, the
// sliding log; Store.Key), and for a fixed window counted as plain
// integers a marker (Store.MarkerKey) naming its counter key (the
// marker's name, ':', its value).
func stateKeys(ctx context.Context, c rueidis.Client, store *redisstore.Store, key string) ([]RedisKey, error) {
	out, err := packedKey(ctx, c, store, key)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, a := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog} {
		names = append(names, store.Key(a, key))
	}
	marker := store.MarkerKey(key)
	names = append(names, marker)
	if v, err := c.Do(ctx, c.B().Get().Key(marker).Build()).ToString(); err == nil {
		names = append(names, marker+":"+v)
	} else if !rueidis.IsRedisNil(err) {
		return nil, err
	}
	for _, name := range names {
		r := c.DoMulti(ctx,
			c.B().Type().Key(name).Build(),
			c.B().ObjectEncoding().Key(name).Build(),
			c.B().MemoryUsage().Key(name).Samples(0).Build())
		typ, err := r[0].ToString()
		if err != nil {
			return nil, err
		}
		if typ == "none" {
			continue
		}
		k := RedisKey{Name: name}
		if k.Encoding, err = r[1].ToString(); err != nil {
			return nil, err
		}
		if k.Usage, err = r[2].AsInt64(); err != nil {
			return nil, err
		}
		if typ == "list" {
			vs, err := c.Do(ctx, c.B().Lrange().Key(name).Start(0).Stop(-1).Build()).AsStrSlice()
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				k.ValueBytes += int64(len(v))
			}
		} else if k.ValueBytes, err = c.Do(ctx, c.B().Strlen().Key(name).Build()).AsInt64(); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// packedKey returns key's packed states in store (none in the string
// layout), each as a RedisKey named hash/field (in hexadecimal), its usage
// its hash's MEMORY USAGE over the hash's fields.
func packedKey(ctx context.Context, c rueidis.Client, store *redisstore.Store, key string) ([]RedisKey, error) {
	var out []RedisKey
	for _, a := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		k, err := packedField(ctx, c, store, a, key)
		if err != nil {
			return nil, err
		}
		out = append(out, k...)
	}
	return out, nil
}

// packedField is packedKey for a's state.
func packedField(ctx context.Context, c rueidis.Client, store *redisstore.Store, a ratelimit.Algorithm, key string) ([]RedisKey, error) {
	h, f, ok := store.Field(a, key)
	if !ok {
		return nil, nil
	}
	r := c.DoMulti(ctx, c.B().Hstrlen().Key(h).Field(f).Build(), c.B().Hlen().Key(h).Build(),
		c.B().ObjectEncoding().Key(h).Build(), c.B().MemoryUsage().Key(h).Samples(0).Build())
	vb, err := r[0].AsInt64()
	if err != nil || vb == 0 {
		return nil, err // none: not a bucket
	}
	n, err2 := r[1].AsInt64()
	enc, err3 := r[2].ToString()
	u, err4 := r[3].AsInt64()
	if err := errors.Join(err2, err3, err4); err != nil {
		return nil, err
	}
	return []RedisKey{{Name: fmt.Sprintf("%s/%x", h, f), Encoding: enc, ValueBytes: vb, Usage: u / n}}, nil
}

// packedFields returns the fields of the database's hashes.
func packedFields(ctx context.Context, c rueidis.Client) (int64, error) {
	var total int64
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(1000).Type("hash").Build()).AsScanEntry()
		if err != nil {
			return 0, err
		}
		cmds := make(rueidis.Commands, 0, len(e.Elements))
		for _, k := range e.Elements {
			cmds = append(cmds, c.B().Hlen().Key(k).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			n, err := r.AsInt64()
			if err != nil {
				return 0, err
			}
			total += n
		}
		if cursor = e.Cursor; cursor == 0 {
			return total, nil
		}
	}
}

func usedMemory(ctx context.Context, c rueidis.Client) (int64, error) {
	info, err := c.Do(ctx, c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
}

// keyspaceExpires returns db0's expires count in an INFO keyspace reply
// ("db0:keys=1000000,expires=1000000,avg_ttl=..."), 0 when there is none.
func keyspaceExpires(info string) int64 {
	db := infoField(info, "db0")
	for part := range strings.SplitSeq(db, ",") {
		if v, ok := strings.CutPrefix(part, "expires="); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// infoField returns the value of name in an INFO reply.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// Layout is a model of what string keys with an expiry cost redis-server
// 7.0 (dict.h, server.h, sds.h, object.c), each allocation rounded up to
// the allocator's size class, summed over the Redis keys of one limiter
// key. It says which part dominates; Memory measures the total.
type Layout struct {
	KeyName    int     // the keys' sds: header, bytes, NUL
	DictEntry  int     // the main dictionary's entries (key, value, next)
	Value      int     // the values: robj and sds (one allocation for embstr, up to 44 bytes); 0 for a shared integer below 10000
	ExpireItem int     // the expires dictionary's entries (the key shared)
	Buckets    float64 // both dictionaries' bucket arrays (8 bytes a slot, power of two slots), per limiter key
}

// Total is the layout's bytes per limiter key.
func (l Layout) Total() float64 {
	return float64(l.KeyName+l.DictEntry+l.Value+l.ExpireItem) + l.Buckets
}

// StringLayout models keys string keys with an expiry each, as ks (one
// limiter key's Redis keys; a list makes the model fail: ok false), in a
// database of dbKeys keys, with allocator size classes of quantum bytes
// (8 for Redis's bundled jemalloc, 16 for a stock one).
func StringLayout(ks []RedisKey, keys int, dbKeys int64, quantum int) (l Layout, ok bool) {
	const robj = 16
	for _, k := range ks {
		n := len(k.Name)
		l.KeyName += sizeClass(sdsHeader(n)+n+1, quantum)
		l.DictEntry += sizeClass(24, quantum)
		l.ExpireItem += sizeClass(24, quantum)
		switch k.Encoding {
		case "int":
			// A shared integer (0–9999, no maxmemory) costs nothing; a
			// larger one a robj holding it. Counts here are small.
		case "embstr":
			l.Value += sizeClass(robj+3+int(k.ValueBytes)+1, quantum)
		case "raw":
			l.Value += sizeClass(robj, quantum) + sizeClass(sdsHeader(int(k.ValueBytes))+int(k.ValueBytes)+1, quantum)
		default:
			return l, false
		}
	}
	slots := 1 << bits.Len64(uint64(max(dbKeys-1, 1)))
	l.Buckets = 2 * 8 * float64(slots) / float64(keys)
	return l, true
}

func sdsHeader(n int) int {
	switch {
	case n < 1<<5:
		return 1 // sdshdr5: a key's copy (sdsdup) under 32 bytes
	case n < 1<<8:
		return 3 // sdshdr8
	case n < 1<<16:
		return 5
	}
	return 9
}

// sizeClass rounds n up to jemalloc's small size class: multiples of the
// quantum up to 8 quanta, then four classes per doubling.
func sizeClass(n, quantum int) int {
	if n <= 8 {
		return 8
	}
	if n <= 8*quantum {
		return (n + quantum - 1) / quantum * quantum
	}
	// Four classes between 2^k and 2^(k+1): steps of 2^(k-2).
	k := bits.Len(uint(n-1)) - 1
	step := 1 << (k - 2)
	return (n + step - 1) / step * step
}

// MedianDuration returns the median of ds (0 for none).
func MedianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
