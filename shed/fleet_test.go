package shed_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

func TestGeneralCap(t *testing.T) {
	for _, tc := range []struct {
		cap      int64
		reserved float64
		want     int64
	}{
		{10, 0.2, 8}, {100, 0.3, 70}, {3, 0.5, 1}, {1, 0.2, 0}, {10, 0, 10}, {7, 0.999, 0},
	} {
		if got := shed.GeneralCap(tc.cap, tc.reserved); got != tc.want {
			t.Errorf("GeneralCap(%d, %v) = %d, want %d", tc.cap, tc.reserved, got, tc.want)
		}
	}
}

// Stripe's fleet shedder: non-critical traffic may fill the fleet only up
// to Cap × (1 − Reserved); critical traffic gets the rest, and slots come
// back on release.
func TestFleetReservesForCritical(t *testing.T) {
	ctx := context.Background()
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 10, Reserved: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	const get, critical = 1, 3
	var leases []inflight.Lease
	for i := range 8 {
		l, d, err := f.Acquire(ctx, get)
		if err != nil || !d.Allowed {
			t.Fatalf("GET %d: %+v %v, want admitted", i, d, err)
		}
		leases = append(leases, l)
	}
	if _, d, _ := f.Acquire(ctx, get); d.Allowed || d.Cap != 8 {
		t.Fatalf("9th GET: %+v, want denied at the general cap 8", d)
	}
	for i := range 2 {
		l, d, _ := f.Acquire(ctx, critical)
		if !d.Allowed {
			t.Fatalf("critical %d: %+v, want admitted from the reserve", i, d)
		}
		leases = append(leases, l)
	}
	if _, d, _ := f.Acquire(ctx, critical); d.Allowed || d.InFlight != 10 {
		t.Fatalf("critical beyond the cap: %+v, want denied at 10", d)
	}
	if n, _ := f.InFlight(ctx); n != 10 {
		t.Errorf("InFlight = %d, want 10", n)
	}
	// A critical request leaving frees a slot that a GET still may not take.
	f.Release(ctx, leases[9])
	if _, d, _ := f.Acquire(ctx, get); d.Allowed {
		t.Fatalf("GET with 9 in flight: admitted, want denied (the reserve is critical's)")
	}
	f.Release(ctx, leases[0])
	f.Release(ctx, leases[1])
	if _, d, _ := f.Acquire(ctx, get); !d.Allowed {
		t.Fatalf("GET with 7 in flight: %+v, want admitted", d)
	}
	if !f.Critical(critical) || f.Critical(get) || f.CapFor(get) != 8 || f.CapFor(critical) != 10 {
		t.Errorf("Critical/CapFor wrong")
	}
}

func TestFleetCriticalClasses(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 10, Reserved: 0.5, Critical: 2})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range []bool{false, false, true, true} {
		if got := f.Critical(shed.Class(c)); got != want {
			t.Errorf("Critical(%d) = %v, want %v", c, got, want)
		}
	}
}

func TestNewFleetRefuses(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	for _, o := range []shed.FleetOptions{
		{Cap: 10},
		{Store: store},
		{Store: store, Cap: 10, Reserved: 1},
		{Store: store, Cap: 10, Reserved: -0.1},
		{Store: store, Cap: 10, Critical: 5},
		{Store: store, Cap: 10, TTL: -1},
	} {
		if _, err := shed.NewFleet(o); !errors.Is(err, shed.ErrOptions) {
			t.Errorf("NewFleet(%+v) = %v, want ErrOptions", o, err)
		}
	}
}
