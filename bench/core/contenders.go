// Package core compares sluice's in-memory limiter with the libraries a Go
// programmer would pick instead, side by side in one run:
//
//	cd bench && go test -run '^$' -bench . -count 5 ./core | tee core.txt
//	go run ./core/cmd/coretable < core.txt
//
// Every contender gets the same limit, 1000 events a second with a burst
// of 1000 (or the nearest thing it can express), and the same keys,
// "user:0" … "user:99999", each applied once before the timer starts, so
// the timed loop measures the hot path on existing keys. What each
// library's limit means differs; Contenders says how.
//
// On a machine shared with other work, the paired rounds of corepair give
// steadier ratios than one long run per contender:
//
//	go run ./core/cmd/corepair -rounds 30
//
// Studies are design studies of memstore (study.go), reported beside the
// contenders and never counted as peers. docs/bench-core.md has the figures
// and bench/core/results the raw outputs.
package core

import (
	"context"
	"sync"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/throttled/throttled/v2"
	thmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulmem "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// The limit every contender enforces.
const (
	Rate   = 1000 // events per Period
	Period = time.Second
	Burst  = 1000
)

// Limiter is what the benchmarks drive: admit one event for key.
type Limiter interface {
	Allow(key string) bool
	Close()
}

// Contender is one library (or one configuration of sluice).
type Contender struct {
	Name string
	// Sluice marks sluice's own entries; the others are peers.
	Sluice bool
	// OneKey marks limiters that have no keys (uber-go/ratelimit): they are
	// compared on the one-key case only.
	OneKey bool
	// Algorithm says what the limiter computes, for the report.
	Algorithm string
	// New returns a limiter sized for about keys keys.
	New func(keys int) Limiter
}

// Contenders lists sluice's configurations first, then the peers.
func Contenders() []Contender {
	return []Contender{
		{
			Name: "sluice-gcra-default", Sluice: true,
			Algorithm: "GCRA through ratelimit.Limiter, memstore.Options{} (the clock cached every 1 ms, memstore.DefaultResolution)",
			New:       func(int) Limiter { return newSluice(0) },
		},
		{
			Name: "sluice-gcra-clock-per-call", Sluice: true,
			Algorithm: "GCRA through ratelimit.Limiter, the clock read on every call (Options.Resolution: -1, the opt-out)",
			New:       func(int) Limiter { return newSluice(-1) },
		},
		{
			Name: "sluice-gcra-store-apply-default", Sluice: true,
			Algorithm: "GCRA through Store.Apply (the request names its limit: the gateway's path), memstore.Options{}",
			New:       func(int) Limiter { return newSluiceApply(ratelimit.GCRA) },
		},
		{
			Name:      "x-time-rate-map-mutex",
			Algorithm: "token bucket; one *rate.Limiter per key in a map behind a sync.Mutex",
			New:       newXTimeMap,
		},
		{
			Name:      "x-time-rate-sync-map",
			Algorithm: "token bucket; one *rate.Limiter per key in a sync.Map",
			New:       func(int) Limiter { return &xtimeSyncMap{} },
		},
		{
			Name:      "uber-ratelimit",
			OneKey:    true,
			Algorithm: "leaky bucket (blocking Take); one key only; 1e9/s so Take never sleeps",
			New:       func(int) Limiter { return uberLimiter{uber.New(1_000_000_000)} },
		},
		{
			Name:      "sethvargo-go-limiter",
			Algorithm: "token bucket refilled in whole intervals (memorystore)",
			New:       newSethvargo,
		},
		{
			Name:      "throttled-gcra-memstore",
			Algorithm: "GCRA over a CAS store (memstore.New(0): unbounded map, RWMutex)",
			New:       newThrottled,
		},
		{
			Name:      "ulule-limiter-memory",
			Algorithm: "fixed window counter (memory store)",
			New:       newUlule,
		},
	}
}

// Algorithms lists sluice's other algorithms through Store.Apply with the
// default Options, for the heap per key of every algorithm and their
// speed beside GCRA's. They are sluice's own, never peers; corepair leaves
// them out unless asked (-algorithms).
func Algorithms() []Contender {
	var cs []Contender
	for _, a := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.LeakyBucket, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		cs = append(cs, Contender{
			Name: "sluice-" + a.String() + "-store-apply-default", Sluice: true,
			Algorithm: a.String() + " through Store.Apply, memstore.Options{}",
			New:       func(int) Limiter { return newSluiceApply(a) },
		})
	}
	return cs
}

// sluice

// sluiceLimiter is what a user who applies one limit writes: a
// ratelimit.Limiter on a memstore (the peers, too, are configured with
// their one limit up front).
type sluiceLimiter struct {
	s   *memstore.Store
	l   *ratelimit.Limiter
	ctx context.Context
}

// newSluice is memstore with its default Options but the clock's
// resolution (0: the default; -1: the clock read on every call). The
// default MaxKeys, 2^20, bounds each of 256 shards to 4096 keys: at a
// million keys a few of the fullest shards evict a handful of idle keys,
// as a deployed store would.
func newSluice(res time.Duration) Limiter {
	s := memstore.New(memstore.Options{Resolution: res})
	l, err := ratelimit.NewLimiter(s, ratelimit.GCRA, sluiceLimit)
	if err != nil {
		panic(err)
	}
	return &sluiceLimiter{s: s, l: l, ctx: context.Background()}
}

var sluiceLimit = ratelimit.Limit{Rate: Rate, Period: Period, Burst: Burst}

func (l *sluiceLimiter) Allow(key string) bool {
	d, err := l.l.Allow(l.ctx, key)
	return err == nil && d.Allowed
}

// sluiceApply calls Store.Apply with the whole request, as a caller with
// many limits (the gateway's rules) does.
type sluiceApply struct {
	s   *memstore.Store
	alg ratelimit.Algorithm
	ctx context.Context
}

func newSluiceApply(a ratelimit.Algorithm) Limiter {
	return &sluiceApply{memstore.New(memstore.Options{}), a, context.Background()}
}

func (l *sluiceApply) Allow(key string) bool {
	d, err := l.s.Apply(l.ctx, ratelimit.Request{Key: key, Limit: sluiceLimit, Algorithm: l.alg, N: 1})
	return err == nil && d.Allowed
}

func (l *sluiceApply) Close() { l.s.Close() }

func (l *sluiceLimiter) Close() { l.s.Close() }

// golang.org/x/time/rate

type xtimeMap struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newXTimeMap(int) Limiter { return &xtimeMap{m: make(map[string]*rate.Limiter)} }

var xLimit = rate.Limit(float64(Rate) / Period.Seconds())

func (l *xtimeMap) Allow(key string) bool {
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok {
		lim = rate.NewLimiter(xLimit, Burst)
		l.m[key] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

func (l *xtimeMap) Close() {}

type xtimeSyncMap struct{ m sync.Map }

func (l *xtimeSyncMap) Allow(key string) bool {
	v, ok := l.m.Load(key)
	if !ok {
		v, _ = l.m.LoadOrStore(key, rate.NewLimiter(xLimit, Burst))
	}
	return v.(*rate.Limiter).Allow()
}

func (l *xtimeSyncMap) Close() {}

// go.uber.org/ratelimit

type uberLimiter struct{ l uber.Limiter }

func (l uberLimiter) Allow(string) bool { l.l.Take(); return true }
func (l uberLimiter) Close()            {}

// github.com/sethvargo/go-limiter

type sethvargoLimiter struct {
	s interface {
		Take(ctx context.Context, key string) (uint64, uint64, uint64, bool, error)
		Close(ctx context.Context) error
	}
	ctx context.Context
}

func newSethvargo(int) Limiter {
	s, err := memorystore.New(&memorystore.Config{Tokens: Burst, Interval: Period})
	if err != nil {
		panic(err)
	}
	return &sethvargoLimiter{s: s, ctx: context.Background()}
}

func (l *sethvargoLimiter) Allow(key string) bool {
	_, _, _, ok, err := l.s.Take(l.ctx, key)
	return err == nil && ok
}

func (l *sethvargoLimiter) Close() { l.s.Close(l.ctx) }

// github.com/throttled/throttled/v2

type throttledLimiter struct {
	l   *throttled.GCRARateLimiterCtx
	ctx context.Context
}

func newThrottled(int) Limiter {
	st, err := thmem.NewCtx(0)
	if err != nil {
		panic(err)
	}
	// throttled's MaxBurst is the burst beyond the first event.
	l, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(Rate, Period), MaxBurst: Burst - 1})
	if err != nil {
		panic(err)
	}
	return &throttledLimiter{l: l, ctx: context.Background()}
}

func (l *throttledLimiter) Allow(key string) bool {
	limited, _, err := l.l.RateLimitCtx(l.ctx, key, 1)
	return err == nil && !limited
}

func (l *throttledLimiter) Close() {}

// github.com/ulule/limiter/v3

type ululeLimiter struct {
	l   *ulule.Limiter
	ctx context.Context
}

func newUlule(int) Limiter {
	st := ulmem.NewStoreWithOptions(ulule.StoreOptions{Prefix: ulule.DefaultPrefix, CleanUpInterval: time.Hour})
	return &ululeLimiter{l: ulule.New(st, ulule.Rate{Period: Period, Limit: Rate}), ctx: context.Background()}
}

func (l *ululeLimiter) Allow(key string) bool {
	c, err := l.l.Get(l.ctx, key)
	return err == nil && !c.Reached
}

func (l *ululeLimiter) Close() {}
