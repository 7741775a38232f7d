// Package redisstore is a ratelimit.Store that keeps limiter state in Redis,
// standalone or Cluster (Valkey too), so that every instance of a service
// spends from the same budget.
//
// Open connects by URL and New wraps a rueidis client you already have:
//
//	s, err := redisstore.Open(ctx, "redis://:password@redis:6379/0", redisstore.Options{})
//	s, err := redisstore.Open(ctx, "redis-cluster://10.0.0.1:6379,10.0.0.2:6379", redisstore.Options{})
//
// # Exactly the memory store's decisions
//
// Each algorithm's Go step (the ones memstore runs) has a Lua twin, run
// atomically by EVALSHA (EVAL after a NOSCRIPT). Lua's numbers are doubles,
// exact only below 2^53, and a time in Unix nanoseconds is not; the scripts
// carry times as seconds and nanoseconds (and so the durations of windows
// longer than 2^53 ns, up to ratelimit.MaxWindow) and compute every
// difference exactly, and the sliding window counter's float formula is
// evaluated in the Go step's order. A differential test runs both on random
// sequences and requires identical decisions, weighted costs and peeks
// included.
//
// State is one Redis key per limiter key and state shape: the TAT and the
// emission interval in 12 bytes (20 when they pass 32 bits) for GCRA,
// TokenBucket and LeakyBucket (which share it, as in memstore), the
// window's start, both counts, the key's expiry second and the period in
// 28 bytes (48 past 32 bits) for FixedWindow and SlidingWindowCounter, and
// for SlidingWindowLog a list of the running sum followed by "time cost"
// entries, so that a call costs O(1) amortized, not O(Rate). Keys are
// named Prefix + shape + "{" + slot tag + "}" + hash (28 to 30 bytes
// with the default prefix, whatever the key's length): the hash is 96 bits of the key's SHA-256,
// and the slot tag a short text that Cluster hashes to the slot the
// readable name Prefix + shape + "{" + key + "}" had, so that all the
// names of one key share a slot (keys.go). Store.Key computes a name from
// the readable key; states written under readable names by an earlier
// version are read until they expire. Keys expire when their state has
// decayed to a full quota, which is the same as an absent key (a bucket's
// or a window's key at the first whole second after that, so that most
// writes keep the expiry they find). The bucket and window scripts decide
// admission and return what the decision was taken on (a backlog, the counts); the client derives the
// rest of the decision with the Go step itself.
//
// # Packed layout
//
// Options.Layout LayoutPacked keeps the buckets' and the windows' states
// as 8-byte fields of hashes, Options.PackedBuckets hashes per slot tag
// (packed.go; Store.Field names a key's), in a fifth to a third of the
// string keys' memory: a hash expires at its latest field's expiry, and a
// write that grows a hash past a mark sweeps its decayed fields
// (lua/packed.lua). The scripts are the string layout's, over other
// storage functions, so the decisions are the same. See docs/redis.md.
//
// # Clock
//
// By default the scripts read the Redis server's clock (TIME), so instances
// whose clocks disagree still agree on every limit. (On a Cluster each node
// uses its own clock for its own keys.) Options.Now replaces it, for tests
// and simulations; the time is then read in the process.
//
// # Throughput
//
// Concurrent Apply calls are coalesced: while a script call is in flight,
// the requests that arrive meanwhile wait for the next one, which decides up
// to Options.MaxBatch of them in one round trip and one script run (on a
// Cluster, per node: the keys of a node's slots go undeclared in one call,
// and again one call per slot when the slot map was stale; nodes.go).
// Options.Pipeline such calls (two by default) may
// be in flight at once, pipelined on one connection by rueidis; a call goes
// out while another is in flight only with at least MaxBatch/4 requests, so
// that redis-server and the client work at once without shrinking batches.
// A lone request goes out at once:
// batching adds no delay, it only fills the time a request would have
// waited anyway. A lone FixedWindow charge of a whole-millisecond period
// goes as plain commands in one MULTI (INCRBY on its one key, an integer
// count whose expiry is its window's end) instead of a script call, which costs redis-server a quarter
// of the command time; its decisions are the script's (Options.ScriptOnly
// turns it off; docs/redis.md says when it applies and its transients).
// For Options.CompatWindow after it starts (an hour) a store writes the
// marker form of the versions before instead, which they read: a fleet
// upgraded one instance at a time must finish within it.
//
// # Hot keys: prefetch mode
//
// One Redis primary decides about 100–200k requests a second for one key.
// NewPrefetch wraps a Store so that an instance takes a slice of a hot key's
// budget in one script call, decides from it in process, and gives back
// what it did not spend; slices are sized from the key's observed rate and
// cold keys stay exact. Over-admission is at most (instances) × (largest
// slice), 1% of the capacity with the defaults and up to 10 instances, and
// 0 for the fixed window. See Prefetch.
//
// # Failures
//
// A denial is a Decision; an error means Redis could not decide (it wraps
// ErrUnavailable or ErrScript). No Apply waits for Redis longer than
// Options.Timeout (100 ms by default) counted from when the call is
// queued: the deadline holds while it waits for a batch, and while its
// batch is in flight, however many hung batches it waited behind. A
// watchdog checks every quarter of the timeout, so a wait lasts at most
// 1.25·Timeout. After BreakerThreshold consecutive failures a breaker
// stops calling Redis, so an outage does not add a timeout to every
// request. Options.OnError (a ratelimit.FailurePolicy) then chooses: FailError (the
// default: the caller decides), FailAllow (fail open, as Stripe does),
// FailDeny (fail closed), or FailLocal (an in-process memstore applying the same limits until Redis
// answers again; each instance then enforces the limit alone, so n
// instances admit up to n times it). There is a breaker per node (a
// standalone server is one; on a Cluster, each primary of the slot map):
// one lost primary sends only its keys to the policy. While a breaker is
// open, one caller's request per Options.BreakerTrial (100 ms) goes to
// Redis, alone, and its answer closes the breaker: decisions go back to
// Redis within about a trial interval of Redis answering again.
//
// # Without Redis
//
// Losing Redis, at start or later, does not take the store down. Open
// returns a store even when no server answers (Options.RequireAtStart
// restores the old failure): Apply applies OnError from the first
// request, and the store connects in the background; on a Cluster it
// discovers the slots then. While the store has no connection or a
// breaker is open, a goroutine of the store also probes Redis, which
// closes breakers when no request comes: after BreakerCooldown, then doubling the wait after each
// failed probe up to BreakerMaxCooldown (1 s to 5 s by default), each wait
// lengthened by up to a quarter at random so that a fleet does not probe
// in step. A probe sends PING and loads the scripts (a restarted server
// has lost them) to every node; each node that answers has its breaker
// closed. On a Cluster the slot map is read again while a breaker is
// open (every 500 ms at most), so a replica promoted in a lost primary's
// place takes its slots back to Redis. Close stops the prober; it
// waits for a connection attempt in progress, which ends within the
// dial timeout.
//
// Store.Health reports where the store is, for a server's metrics and
// readiness detail: connected or not, since when, the last error, and the
// counts of failures and reconnections; Options.OnHealth is called at
// each change and Options.OnFailure with each failed call, connection
// attempt and probe. A server that answers and refuses the configuration
// (a certificate that does not verify, a wrong password, a database that
// does not exist) fails Open whatever RequireAtStart says: retrying
// would not change that.
//
// # Denial cache
//
// With Options.DenyCache, a request denied with RetryAfter d is denied
// locally for d, without a round trip, for the same key, limit and algorithm
// and any cost at least as large (Cloudflare caches "mitigation active"
// flags the same way). A denial consumes nothing, so the cache never admits
// what Redis would deny; it may deny what Redis would admit when capacity
// comes back sooner than RetryAfter said: when the limit's state was reset
// or deleted in Redis, and by the skew between the process's clock (which
// times the cache) and Redis's. Peeks and LeakyBucket requests with a
// MaxDelay are never cached. The cache is bounded by DenyCacheSize entries
// and as many times 256 bytes (each entry counted as its key plus 128):
// when full, expired entries go first, then any. It is the same cache as
// the RLS's local over-limit cache (rls.Options.LocalCacheSize), which is
// what sluice rls's deprecated --deny-cache turns on.
package redisstore
