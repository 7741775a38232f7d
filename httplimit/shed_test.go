package httplimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

func classes(t testing.TB) shed.Classes {
	c, err := shed.NewClasses("test", "get", "post", "critical")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPriorityClass(t *testing.T) {
	cs := classes(t)
	const test, get, post, critical = 0, 1, 2, 3
	p := httplimit.Priority{Classes: cs, Header: "X-Priority", Tiers: map[string]shed.Class{"sandbox": test},
		Methods: map[string]shed.Class{"GET": get, "POST": post}, Default: post}
	route := p
	route.Route, route.HasRoute = critical, true
	trusted := identity.Identity{IP: netip.MustParseAddr("10.0.0.1"), TrustedPeer: true}
	client := identity.Identity{IP: netip.MustParseAddr("192.0.2.1")}
	sandbox := identity.Identity{User: "u", Tier: "sandbox", Authenticated: true}
	for _, tc := range []struct {
		name   string
		p      *httplimit.Priority
		method string
		id     identity.Identity
		hdr    []string
		want   shed.Class
	}{
		{"GET", &p, "GET", client, nil, get},
		{"HEAD is GET", &p, "HEAD", client, nil, get},
		{"POST", &p, "POST", client, nil, post},
		{"other method: default", &p, "DELETE", client, nil, post},
		{"route over method", &route, "GET", client, nil, critical},
		{"tier over route", &route, "GET", sandbox, nil, test},
		{"header from a trusted proxy", &route, "GET", trusted, []string{"X-Priority", "test"}, test},
		{"header from a client is ignored", &p, "GET", client, []string{"X-Priority", "critical"}, get},
		{"unknown class from the proxy is ignored", &p, "GET", trusted, []string{"X-Priority", "vip"}, get},
		{"header with spaces", &p, "GET", trusted, []string{"X-Priority", " critical "}, critical},
	} {
		r := httptest.NewRequest(tc.method, "/", nil)
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			r.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		if got := tc.p.Class(r, tc.id); got != tc.want {
			t.Errorf("%s: class %s, want %s", tc.name, cs.Name(got), cs.Name(tc.want))
		}
	}
	// Two values from the proxy: ambiguous, ignored.
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("X-Priority", "critical")
	r.Header.Add("X-Priority", "test")
	if got := p.Class(r, trusted); got != get {
		t.Errorf("two header values: %s, want get", cs.Name(got))
	}
}

// A utilization shedder behind the middleware: with every worker busy for
// long enough, test traffic is answered 503 with Retry-After and a
// problem+json body; critical traffic still passes.
func TestShedderUtilization(t *testing.T) {
	clk := struct {
		sync.Mutex
		t time.Time
	}{t: time.Unix(1e9, 0)}
	now := func() time.Time { clk.Lock(); defer clk.Unlock(); return clk.t }
	advance := func(d time.Duration) { clk.Lock(); clk.t = clk.t.Add(d); clk.Unlock() }
	cs := classes(t)
	u, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: 2, Ramp: time.Second, Classes: cs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	// POSTs are held at the gate; everything else answers at once.
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			g.ServeHTTP(w, r)
		}
	})
	var events []httplimit.ShedEvent
	var mu sync.Mutex
	h := (&httplimit.Shedder{Utilization: u, Priority: httplimit.Priority{Classes: cs, Header: "X-Priority",
		Methods: map[string]shed.Class{"GET": 1, "POST": 2}, Default: 2},
		Observe: func(e httplimit.ShedEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }}).Handler(next)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); serve(h, "192.0.2.1", "POST") }()
		<-g.entered
	}
	advance(time.Second)
	if w := serve(h, "192.0.2.1", "GET"); w.Code != 200 { // the first update: the arrivals saw 0 and 1 busy
		t.Fatalf("GET at measured utilization 0.25: %d, want 200", w.Code)
	}
	advance(time.Second) // the second: the GET saw 2 busy
	w := serve(h, "192.0.2.1", "GET")
	if s := u.Stats(); s.Amount != 1 {
		t.Fatalf("shedder %+v, want amount 1 (utilization 1, ramp of one interval)", s)
	}
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("GET at full utilization: %d %v, want 503, Retry-After 1, problem+json", w.Code, w.Header())
	}
	var p httplimit.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != 503 || !strings.Contains(p.Detail, `"get"`) {
		t.Errorf("problem %+v %v, want 503 naming class get", p, err)
	}
	close(g.release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	shedGets := 0
	for _, e := range events {
		if e.Outcome == httplimit.Denied && e.Class == 1 && e.Shedder == "utilization" {
			shedGets++
		}
	}
	if shedGets == 0 {
		t.Errorf("no shed GET observed in %v", events)
	}
	if u.Stats().InFlight != 0 {
		t.Errorf("%d in flight after every request ended", u.Stats().InFlight)
	}
}

// The fleet cap of 2 with half reserved: one GET in flight fills the
// general share; a second GET is shed, a critical request is not; every
// lease is back when the requests end.
func TestShedderFleet(t *testing.T) {
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()
	cs := classes(t)
	f, err := shed.NewFleet(shed.FleetOptions{Store: store, Key: "fleet", Cap: 2, Reserved: 0.5, Classes: cs})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	h := (&httplimit.Shedder{Fleet: f, Priority: httplimit.Priority{Classes: cs,
		Methods: map[string]shed.Class{"GET": 1, "POST": 3}, Default: 2}}).Handler(g)
	done := make(chan int, 3)
	go func() { done <- serve(h, "192.0.2.1", "GET").Code }()
	<-g.entered
	if w := serve(h, "192.0.2.2", "GET"); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second GET: %d, want 503 with Retry-After", w.Code)
	}
	go func() { done <- serve(h, "192.0.2.3", "POST").Code }() // critical, from the reserve
	<-g.entered
	close(g.release)
	for range 2 {
		if c := <-done; c != 200 {
			t.Errorf("held request: %d", c)
		}
	}
	if n, _ := store.Peek(context.Background(), "fleet"); n != 0 {
		t.Errorf("%d in flight after every request ended", n)
	}
	// Panic: released too.
	hp := (&httplimit.Shedder{Fleet: f, Priority: httplimit.Priority{Classes: cs}}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() { recover() }()
		serve(hp, "192.0.2.1", "GET")
	}()
	if n, _ := store.Peek(context.Background(), "fleet"); n != 0 {
		t.Errorf("%d in flight after a panic", n)
	}
}
