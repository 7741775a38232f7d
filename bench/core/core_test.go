package core

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

const (
	numKeys  = 100_000   // the many-keys cases
	heapKeys = 1_000_000 // the heap-per-key case
)

func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}

// prepared returns a limiter that has seen every key once.
func prepared(b *testing.B, c Contender, keys []string) Limiter {
	b.Helper()
	l := c.New(len(keys))
	b.Cleanup(l.Close)
	for _, k := range keys {
		l.Allow(k)
	}
	return l
}

// BenchmarkCore runs every contender through the same cases:
//
//	one-key        one key, one goroutine
//	100k-serial    100k existing keys in turn, one goroutine
//	100k-parallel  100k existing keys, GOMAXPROCS goroutines each walking
//	               the keys from its own place (b.RunParallel)
//
// admits/op is the share of calls admitted, so that equal work can be
// checked: at 1000/s a key walked every few milliseconds is admitted every
// time, one key hammered in a loop is denied almost every time.
func BenchmarkCore(b *testing.B) {
	keys := keyNames(numKeys)
	b.Run("one-key", func(b *testing.B) {
		for _, c := range withAlgorithms() {
			b.Run(c.Name, func(b *testing.B) { benchSerial(b, prepared(b, c, keys[:1]), keys[:1]) })
		}
	})
	b.Run("100k-serial", func(b *testing.B) {
		for _, c := range withAlgorithms() {
			if c.OneKey {
				continue
			}
			b.Run(c.Name, func(b *testing.B) { benchSerial(b, prepared(b, c, keys), keys) })
		}
	})
	b.Run("100k-parallel", func(b *testing.B) {
		for _, c := range withAlgorithms() {
			if c.OneKey {
				continue
			}
			b.Run(c.Name, func(b *testing.B) { benchParallel(b, prepared(b, c, keys), keys) })
		}
	})
}

func benchSerial(b *testing.B, l Limiter, keys []string) {
	i, admitted := 0, 0
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if l.Allow(keys[i]) {
			admitted++
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(admitted)/float64(b.N), "admits/op")
}

// reportCPU reports the process CPU time per operation since start:
// unlike ns/op (wall time), it does not grow when other processes share the
// machine, and for the parallel case it is the work the machine does per
// operation, summed over the cores.
func reportCPU(b *testing.B, start int64) {
	if start > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func benchParallel(b *testing.B, l Limiter, keys []string) {
	var seq, admitted atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)*7919) % len(keys)
		n := int64(0)
		for pb.Next() {
			if l.Allow(keys[i]) {
				n++
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		admitted.Add(n)
	})
	reportCPU(b, cpu)
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admits/op")
}

// BenchmarkHeapPerKey reports the live heap each contender holds per key
// after one request on each of a million keys ("user:0" … "user:999999",
// made as the loop goes, so the stores own their key strings), from
// runtime.ReadMemStats after a GC before and after. ns/op is the time to
// create the million keys.
func BenchmarkHeapPerKey(b *testing.B) {
	for _, c := range withAlgorithms() {
		if c.OneKey {
			continue
		}
		b.Run(c.Name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := heapAlloc()
				l := c.New(heapKeys)
				for i := range heapKeys {
					l.Allow("user:" + strconv.Itoa(i))
				}
				after := heapAlloc()
				perKey = float64(int64(after)-int64(before)) / heapKeys
				runtime.KeepAlive(l)
				l.Close()
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestContendersAgree checks that the contenders enforce the same limit on
// one key: 1000 admitted at once, then denials (except uber-go/ratelimit,
// which delays instead of denying).
func TestContendersAgree(t *testing.T) {
	for _, c := range all() {
		if c.OneKey {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			l := c.New(1)
			defer l.Close()
			n := 0
			start := time.Now()
			for range 2 * Burst {
				if l.Allow("k") {
					n++
				}
			}
			// Refills land while the loop runs (one a ms), and a busy
			// machine can stretch the loop.
			refills := int(time.Since(start)/time.Millisecond) + 2
			if n < Burst || n > Burst+refills {
				t.Errorf("admitted %d of %d at once, want %d plus at most %d refills", n, 2*Burst, Burst, refills)
			}
		})
	}
}

// BenchmarkTimeNow is the cost of reading the clock once, which every
// contender but sluice's cached-clock configuration pays on every call.
func BenchmarkTimeNow(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += time.Now().UnixNano()
	}
	runtime.KeepAlive(sink)
}

// all is the contenders and then the design studies.
func all() []Contender { return append(Contenders(), Studies()...) }

// withAlgorithms is all and sluice's other algorithms (Algorithms), which
// the benchmarks measure and TestContendersAgree leaves to memstore's own
// tests (a fixed window admits twice its limit across a window's edge).
func withAlgorithms() []Contender { return append(all(), Algorithms()...) }
