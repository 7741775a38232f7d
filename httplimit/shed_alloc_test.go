package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// A request through the fleet shedder allocates nothing: its lease is
// renewed by the Fleet's one renewer, not by a timer of its own (which
// cost 4 allocations a request).
func TestShedderFleetAllocatesNothing(t *testing.T) {
	cs := classes(t)
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 1 << 30, Classes: cs})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := &httplimit.Shedder{Fleet: f, Priority: httplimit.Priority{Classes: cs, Default: 1}}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Code)
	}
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) }); n != 0 {
		t.Errorf("a request through the fleet shedder: %v allocations, want 0", n)
	}
	if n, _ := f.InFlight(r.Context()); n != 0 {
		t.Errorf("in flight after the requests: %d, want 0", n)
	}
}
