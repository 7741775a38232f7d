package memstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// The hot-path benchmarks: Apply on keys that already exist, for every
// algorithm, with the cached clock (the default, Options.Resolution = 0:
// 1 ms) and with the per-call clock (Options.Resolution = -1). The limit is 1000
// a second with a burst of 1000, the one bench/core gives every peer.
//
//	go test -run '^$' -bench . -benchmem ./memstore

const benchKeys = 100_000

var benchLimit = ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 1000}

func benchKeyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}

type benchClock struct {
	name string
	res  time.Duration
}

var benchClocks = []benchClock{{"clock=per-call", -1}, {"clock=cached-1ms", 0}}

// newBenchStore returns a store holding every key once, so that the timed
// loop only meets existing keys.
func newBenchStore(b *testing.B, res time.Duration, alg ratelimit.Algorithm, keys []string) *memstore.Store {
	b.Helper()
	s := memstore.New(memstore.Options{Resolution: res, SweepInterval: -1, MaxKeys: -1})
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, k := range keys {
		if _, err := s.Apply(ctx, ratelimit.Request{Key: k, Limit: benchLimit, Algorithm: alg, N: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func BenchmarkApply(b *testing.B) {
	keys := benchKeyNames(benchKeys)
	for _, alg := range ratelimit.Algorithms() {
		for _, c := range benchClocks {
			b.Run(alg.String()+"/"+c.name, func(b *testing.B) {
				b.Run("one-key", func(b *testing.B) {
					s := newBenchStore(b, c.res, alg, keys[:1])
					benchSerial(b, s, alg, keys[:1])
				})
				b.Run("100k-serial", func(b *testing.B) {
					s := newBenchStore(b, c.res, alg, keys)
					benchSerial(b, s, alg, keys)
				})
				b.Run("100k-parallel", func(b *testing.B) {
					s := newBenchStore(b, c.res, alg, keys)
					benchParallel(b, s, alg, keys)
				})
			})
		}
	}
}

func benchSerial(b *testing.B, s *memstore.Store, alg ratelimit.Algorithm, keys []string) {
	ctx := context.Background()
	req := ratelimit.Request{Limit: benchLimit, Algorithm: alg, N: 1}
	i, admitted := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		req.Key = keys[i]
		if i++; i == len(keys) {
			i = 0
		}
		d, err := s.Apply(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	b.ReportMetric(float64(admitted)/float64(b.N), "admits/op")
}

func benchParallel(b *testing.B, s *memstore.Store, alg ratelimit.Algorithm, keys []string) {
	var (
		seq      atomic.Int64
		admitted atomic.Int64
	)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		req := ratelimit.Request{Limit: benchLimit, Algorithm: alg, N: 1}
		// Each goroutine walks the keys from its own place.
		i := int(seq.Add(1)*7919) % len(keys)
		n := int64(0)
		for pb.Next() {
			req.Key = keys[i]
			if i++; i == len(keys) {
				i = 0
			}
			if d, _ := s.Apply(ctx, req); d.Allowed {
				n++
			}
		}
		admitted.Add(n)
	})
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admits/op")
}

// BenchmarkHeapPerKey reports the heap a store holds per idle key at a
// million keys ("user:0" … "user:999999", the key strings owned by the
// store), for every algorithm, measured with runtime.ReadMemStats after a
// GC before and after. Each key takes one request, so a sliding log holds
// one entry; the entries=k cases give each log key k requests at distinct
// instants (a clock that moves a microsecond a call), what a log that
// holds more than one entry costs. ns/op is the time to fill the store.
//
//	go test -run '^$' -bench HeapPerKey -benchtime 1x ./memstore
func BenchmarkHeapPerKey(b *testing.B) {
	const n = 1_000_000
	type heapCase struct {
		name    string
		alg     ratelimit.Algorithm
		entries int
	}
	var cases []heapCase
	for _, alg := range ratelimit.Algorithms() {
		cases = append(cases, heapCase{alg.String(), alg, 1})
	}
	cases = append(cases, heapCase{"sliding_window_log/entries=2", ratelimit.SlidingWindowLog, 2},
		heapCase{"sliding_window_log/entries=10", ratelimit.SlidingWindowLog, 10})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			lim := ratelimit.PerMinute(10) // keys stay undecayed for the whole run
			opts := memstore.Options{SweepInterval: -1, MaxKeys: 2 * n}
			if c.entries > 1 {
				t := time.Now()
				opts.Now = func() time.Time { t = t.Add(time.Microsecond); return t }
			}
			var perKey float64
			var held int
			for b.Loop() {
				before := heapInUse()
				s := memstore.New(opts)
				for i := range n {
					req := ratelimit.Request{Key: "user:" + strconv.Itoa(i), Limit: lim, Algorithm: c.alg, N: 1}
					for range c.entries {
						s.Apply(ctx, req)
					}
				}
				after := heapInUse()
				held = s.Len()
				perKey = float64(after-before) / float64(held)
				runtime.KeepAlive(s)
				s.Close()
			}
			if held != n {
				b.Errorf("store holds %d keys, want %d", held, n)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkLimiter is BenchmarkApply's GCRA case through ratelimit.Limiter,
// which binds the limit once (Store.Bind): what a caller with one limit
// writes.
func BenchmarkLimiter(b *testing.B) {
	keys := benchKeyNames(benchKeys)
	for _, c := range benchClocks {
		b.Run(c.name, func(b *testing.B) {
			for _, n := range []int{1, benchKeys} {
				s := newBenchStore(b, c.res, ratelimit.GCRA, keys[:n])
				l, err := ratelimit.NewLimiter(s, ratelimit.GCRA, benchLimit)
				if err != nil {
					b.Fatal(err)
				}
				name := "one-key"
				if n > 1 {
					name = "100k-serial"
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					i, admitted := 0, 0
					b.ReportAllocs()
					for b.Loop() {
						d, err := l.Allow(ctx, keys[i])
						if err != nil {
							b.Fatal(err)
						}
						if i++; i == n {
							i = 0
						}
						if d.Allowed {
							admitted++
						}
					}
					b.ReportMetric(float64(admitted)/float64(b.N), "admits/op")
				})
				if n == 1 {
					continue
				}
				b.Run("100k-parallel", func(b *testing.B) {
					var seq atomic.Int64
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						ctx := context.Background()
						i := int(seq.Add(1)*7919) % n
						for pb.Next() {
							l.Allow(ctx, keys[i])
							if i++; i == n {
								i = 0
							}
						}
					})
				})
			}
		})
	}
}

// BenchmarkFlood is the path a flood of fresh identities takes: every
// request is a new key in a full store (2^16 keys, 256 shards), which must
// first make room. The held keys and the new ones have used one request of
// ten a minute, so each new key evicts one (or takes a decayed one's
// place, with the clock moving on).
func BenchmarkFlood(b *testing.B) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		b.Run(alg.String(), func(b *testing.B) {
			const maxKeys = 1 << 16
			s := memstore.New(memstore.Options{MaxKeys: maxKeys, SweepInterval: -1})
			b.Cleanup(func() { s.Close() })
			ctx := context.Background()
			req := ratelimit.Request{Limit: ratelimit.PerMinute(10), Algorithm: alg, N: 1}
			key := make([]byte, 0, 32)
			i := 0
			next := func() {
				key = strconv.AppendInt(append(key[:0], "flood:"...), int64(i), 10)
				req.Key = string(key)
				i++
			}
			for range maxKeys {
				next()
				s.Apply(ctx, req)
			}
			b.ReportAllocs()
			for b.Loop() {
				next()
				if _, err := s.Apply(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
