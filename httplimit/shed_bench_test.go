package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// The shedder middleware around a handler that does nothing: classify,
// the utilization shedder, the fleet shedder on the memory store.
func BenchmarkShedderMiddleware(b *testing.B) {
	cs := classes(b)
	u, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: 1 << 20, Classes: cs})
	if err != nil {
		b.Fatal(err)
	}
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Cap: 1 << 30, Reserved: 0.2, Classes: cs})
	if err != nil {
		b.Fatal(err)
	}
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	prio := httplimit.Priority{Classes: cs, Methods: map[string]shed.Class{"GET": 1, "POST": 2}, Default: 2}
	for _, tc := range []struct {
		name string
		mw   *httplimit.Shedder
	}{
		{"utilization", &httplimit.Shedder{Utilization: u, Priority: prio}},
		{"utilization+fleet", &httplimit.Shedder{Utilization: u, Fleet: f, Priority: prio}},
	} {
		h := tc.mw.Handler(noop)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "192.0.2.1:1234"
				w := httptest.NewRecorder()
				for pb.Next() {
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}
