package inflight_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// BenchmarkAcquireRelease is one request's cost: enter a key and leave it.
// The key is freed on each release and made again on the next acquire.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	s := inflight.NewMemory(inflight.MemoryOptions{})
	req := inflight.Request{Key: "user:42", Cap: 100}
	b.ReportAllocs()
	for b.Loop() {
		l, d, err := s.Acquire(ctx, req)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		s.Release(ctx, l)
	}
}

// BenchmarkAcquireReleaseCachedClock: with MemoryOptions.Resolution.
func BenchmarkAcquireReleaseCachedClock(b *testing.B) {
	ctx := context.Background()
	s := inflight.NewMemory(inflight.MemoryOptions{Resolution: time.Millisecond})
	defer s.Close()
	req := inflight.Request{Key: "user:42", Cap: 100}
	b.ReportAllocs()
	for b.Loop() {
		l, d, err := s.Acquire(ctx, req)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		s.Release(ctx, l)
	}
}

// BenchmarkAcquireReleaseBusy: the key keeps 50 other leases in flight.
func BenchmarkAcquireReleaseBusy(b *testing.B) {
	ctx := context.Background()
	s := inflight.NewMemory(inflight.MemoryOptions{})
	req := inflight.Request{Key: "user:42", Cap: 100}
	for range 50 {
		s.Acquire(ctx, req)
	}
	b.ReportAllocs()
	for b.Loop() {
		l, d, err := s.Acquire(ctx, req)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		s.Release(ctx, l)
	}
}

// BenchmarkAcquireReleaseParallel: each goroutine its own key (many users).
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	ctx := context.Background()
	s := inflight.NewMemory(inflight.MemoryOptions{})
	var g atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := inflight.Request{Key: "user:" + strconv.FormatInt(g.Add(1), 10), Cap: 100}
		for pb.Next() {
			l, d, err := s.Acquire(ctx, req)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			s.Release(ctx, l)
		}
	})
}

// BenchmarkAcquireReleaseParallelOneKey: every goroutine on one key (a
// fleet-wide key), the contended case.
func BenchmarkAcquireReleaseParallelOneKey(b *testing.B) {
	ctx := context.Background()
	s := inflight.NewMemory(inflight.MemoryOptions{})
	req := inflight.Request{Key: "fleet", Cap: 1 << 20}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, d, err := s.Acquire(ctx, req)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			s.Release(ctx, l)
		}
	})
}
