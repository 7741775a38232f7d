package shed_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// The decision of the utilization shedder, serial and contended, while it
// sheds 80% of the test class (the deterministic every-k-th path) and
// admits the others: 84 of 100 workers busy, amount 0.2.
func BenchmarkUtilizationAcquire(b *testing.B) {
	newShedder := func(b *testing.B) *shed.Utilization {
		var ns atomic.Int64 // a clock that costs what time.Now costs, without a lock
		ns.Store(time.Now().UnixNano())
		now := func() time.Time { return time.Unix(0, ns.Load()) }
		u, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: 100, Ramp: time.Second, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		for range 84 {
			u.Acquire(3)
		}
		for range 2 {
			ns.Add(int64(time.Second))
			probe(u, 3)
		}
		if f := u.ShedFraction(0); f < 0.79 || f > 0.81 {
			b.Fatalf("test class shed %v, want 0.8", f)
		}
		return u
	}
	b.Run("serial", func(b *testing.B) {
		u := newShedder(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if u.Acquire(shed.Class(i & 3)) {
				u.Release()
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		u := newShedder(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if u.Acquire(shed.Class(i & 3)) {
					u.Release()
				}
				i++
			}
		})
	})
}

// The fleet shedder on the memory store: one shared key, acquire+release.
func BenchmarkFleetAcquireMemory(b *testing.B) {
	benchFleet(b, func(ctx context.Context, f *shed.Fleet) {
		l, _, _ := f.Acquire(ctx, 1)
		f.Release(ctx, l)
	})
}

// The fleet shedder's Enter and Leave on the memory store: acquire and
// release with the lease held in the Fleet's renewed set (what the
// middleware does per request).
func BenchmarkFleetEnterLeave(b *testing.B) {
	benchFleet(b, func(ctx context.Context, f *shed.Fleet) {
		t, _, _ := f.Enter(ctx, 1)
		f.Leave(t)
	})
}

// benchFleet runs op serially and in parallel on a fleet of a memory
// store.
func benchFleet(b *testing.B, op func(context.Context, *shed.Fleet)) {
	ctx := context.Background()
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 1 << 30, Reserved: 0.2})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op(ctx, f)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(ctx, f)
			}
		})
	})
}
