package shed_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// newTestFleet is a fleet of cap 1 on a memory store, with a lease TTL of
// 3 s.
func newTestFleet(t *testing.T) (*shed.Fleet, *inflight.Memory) {
	t.Helper()
	store := inflight.NewMemory(inflight.MemoryOptions{})
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 1, TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return f, store
}

// A request that runs for many TTLs keeps its slot: the Fleet's renewer
// renews its lease; when it leaves, the slot is free at once.
func TestFleetRenewsLongRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f, store := newTestFleet(t)
		defer store.Close()
		defer f.Close()
		tk, d, err := f.Enter(ctx, 1)
		if err != nil || !d.Allowed || !tk.Held() {
			t.Fatalf("Enter = %+v, %+v, %v; want admitted", tk, d, err)
		}
		for i := range 10 {
			time.Sleep(time.Second)
			if _, d, _ := f.Acquire(ctx, 1); d.Allowed {
				t.Fatalf("%d s into a request on a fleet of cap 1: another admitted (its lease expired)", i+1)
			}
		}
		if err := f.Leave(tk); err != nil {
			t.Fatal(err)
		}
		if n, _ := f.InFlight(ctx); n != 0 {
			t.Errorf("in flight after Leave: %d, want 0", n)
		}
		if err := f.Leave(tk); err != nil { // twice: nothing
			t.Fatal(err)
		}
		tk2, d, _ := f.Enter(ctx, 1)
		if !d.Allowed {
			t.Fatalf("Enter after Leave: %+v, want admitted", d)
		}
		if err := f.Leave(tk); err != nil { // the old ticket does not free the new request's slot
			t.Fatal(err)
		}
		if n, _ := f.InFlight(ctx); n != 1 {
			t.Errorf("in flight after a stale Leave: %d, want 1", n)
		}
		f.Leave(tk2)
	})
}

// A process that dies holding a lease (here: the renewer stopped by Close,
// the request never leaving) gives its slot back after the TTL.
func TestFleetLeaseExpiresWithoutRenewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f, store := newTestFleet(t)
		defer store.Close()
		if _, d, _ := f.Enter(ctx, 1); !d.Allowed {
			t.Fatalf("Enter: %+v", d)
		}
		f.Close()
		f.Close() // idempotent
		time.Sleep(3*time.Second + time.Millisecond)
		if _, d, _ := f.Acquire(ctx, 1); !d.Allowed {
			t.Fatalf("a TTL after the renewer stopped: %+v, want the dead request's slot back", d)
		}
	})
}

// Requests start no goroutine and no timer of their own: a hundred at once
// run one renewer, which returns a renewal period after the last leaves.
func TestFleetOneRenewer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := inflight.NewMemory(inflight.MemoryOptions{})
		defer store.Close()
		f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 1000, TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var tks []shed.Ticket
		for range 100 {
			tk, d, _ := f.Enter(ctx, 1)
			if !d.Allowed {
				t.Fatal(d)
			}
			tks = append(tks, tk)
		}
		synctest.Wait()
		if n := renewers(); n != 1 {
			t.Errorf("100 requests in flight: %d renewer goroutines, want 1", n)
		}
		time.Sleep(10 * time.Second)
		if n, _ := f.InFlight(ctx); n != 100 {
			t.Errorf("in flight 10 s (3 TTLs) on: %d, want 100", n)
		}
		for _, tk := range tks {
			f.Leave(tk)
		}
		time.Sleep(2 * time.Second) // a renewal period (TTL/3) and more
		synctest.Wait()
		if n := renewers(); n != 0 {
			t.Errorf("no request in flight: %d renewer goroutines, want 0 (it returns)", n)
		}
		// It starts again with the next request.
		tk, _, _ := f.Enter(ctx, 1)
		time.Sleep(10 * time.Second)
		if n, _ := f.InFlight(ctx); n != 1 {
			t.Errorf("in flight 10 s after the renewer restarted: %d, want 1", n)
		}
		f.Leave(tk)
		f.Close()
	})
}

// renewers counts the goroutines running a Fleet's renewer.
func renewers() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "shed.(*Fleet).renew(")
}

// Enter and Leave allocate nothing (so no timer either) once the set has room.
func TestFleetEnterLeaveAllocs(t *testing.T) {
	ctx := context.Background()
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Leave(must(f.Enter(ctx, 1)))
	if n := testing.AllocsPerRun(100, func() { f.Leave(must(f.Enter(ctx, 1))) }); n != 0 {
		t.Errorf("Enter + Leave: %v allocations, want 0", n)
	}
}

func must(tk shed.Ticket, d inflight.Decision, err error) shed.Ticket {
	if err != nil || !d.Allowed {
		panic("not admitted")
	}
	return tk
}
