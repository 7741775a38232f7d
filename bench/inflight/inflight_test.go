package inflight

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/bulkhead"

	"github.com/sluicehq/sluice/inflight"
)

// Each benchmark enters and leaves once per iteration. The serial ones
// use one key; the parallel ones one key per goroutine (sluice's many
// users) and one shared key (the contended case). The bulkhead has no key:
// its parallel figure is always the contended one.

func BenchmarkSerial(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice-inflight", func(b *testing.B) {
		s := inflight.NewMemory(inflight.MemoryOptions{})
		req := inflight.Request{Key: "user:42", Cap: 100}
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			l, d, err := s.Acquire(ctx, req)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			s.Release(ctx, l)
		}
		reportCPU(b, cpu)
	})
	b.Run("sluice-inflight-cached-clock", func(b *testing.B) {
		s := inflight.NewMemory(inflight.MemoryOptions{Resolution: time.Millisecond})
		defer s.Close()
		req := inflight.Request{Key: "user:42", Cap: 100}
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			l, d, err := s.Acquire(ctx, req)
			if err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
			s.Release(ctx, l)
		}
		reportCPU(b, cpu)
	})
	b.Run("failsafe-bulkhead", func(b *testing.B) {
		bh := bulkhead.New[any](100)
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			if !bh.TryAcquirePermit() {
				b.Fatal("denied")
			}
			bh.ReleasePermit()
		}
		reportCPU(b, cpu)
	})
}

func BenchmarkParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("sluice-inflight-key-per-goroutine", func(b *testing.B) {
		s := inflight.NewMemory(inflight.MemoryOptions{})
		var g atomic.Int64
		b.ReportAllocs()
		cpu := cpuTime()
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
		reportCPU(b, cpu)
	})
	b.Run("sluice-inflight-key-per-goroutine-cached-clock", func(b *testing.B) {
		s := inflight.NewMemory(inflight.MemoryOptions{Resolution: time.Millisecond})
		defer s.Close()
		var g atomic.Int64
		b.ReportAllocs()
		cpu := cpuTime()
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
		reportCPU(b, cpu)
	})
	b.Run("sluice-inflight-one-key", func(b *testing.B) {
		s := inflight.NewMemory(inflight.MemoryOptions{})
		req := inflight.Request{Key: "fleet", Cap: 1 << 20}
		b.ReportAllocs()
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, d, err := s.Acquire(ctx, req)
				if err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
				s.Release(ctx, l)
			}
		})
		reportCPU(b, cpu)
	})
	b.Run("failsafe-bulkhead", func(b *testing.B) {
		bh := bulkhead.New[any](1 << 20)
		b.ReportAllocs()
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !bh.TryAcquirePermit() {
					b.Fatal("denied")
				}
				bh.ReleasePermit()
			}
		})
		reportCPU(b, cpu)
	})
}
