package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// TestClosedLoop: every client connects from its own loopback address and
// keeps its connection; 429s are counted as denials, other statuses as
// errors, and RateLimit headers are seen.
func TestClosedLoop(t *testing.T) {
	var mu sync.Mutex
	addrs := map[string]bool{}
	conns := map[string]bool{}
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		addrs[host] = true
		conns[r.RemoteAddr] = true
		n++
		i := n
		mu.Unlock()
		w.Header().Set("RateLimit", `"x";r=1;t=1`)
		switch i {
		case 3:
			w.WriteHeader(http.StatusTooManyRequests)
		case 5:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	const clients = 5
	r, err := Run(t.Context(), Config{URL: srv.URL, Clients: clients, Duration: 150 * time.Millisecond,
		PIDs: map[string]int{"server": os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != clients || len(conns) != clients {
		t.Errorf("%d source addresses and %d connections, want %d of each: %v", len(addrs), len(conns), clients, addrs)
	}
	if r.Requests == 0 || r.Denied != 1 || r.Errors != 1 || r.FirstErr == "" || !r.Headers {
		t.Errorf("result %+v: want requests, 1 denial, 1 error, headers", r)
	}
	if r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 {
		t.Errorf("latencies p50 %v p99 %v max %v", r.P50, r.P99, r.Max)
	}
	if r.CPU["server"] <= 0 || r.CPU["loadgen"] <= 0 {
		t.Errorf("CPU %v: want the server's and the load generator's", r.CPU)
	}
}

// TestWarmup: the warm-up's requests are sent but not counted.
func TestWarmup(t *testing.T) {
	var mu sync.Mutex
	var n int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
	}))
	defer srv.Close()
	r, err := Run(t.Context(), Config{URL: srv.URL, Clients: 2, Duration: 50 * time.Millisecond, Warmup: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r.Requests == 0 || r.Requests >= n {
		t.Errorf("counted %d of the %d the server saw; want some, not all", r.Requests, n)
	}
}

// TestOpenLoopBehind: a server slower than the offered rate can serve
// leaves requests unsent, and latency counts from the schedule, so it
// exceeds the server's own time.
func TestOpenLoopBehind(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
	}))
	defer srv.Close()
	// One client at most 50/s; 200/s offered for 300 ms: 60 scheduled.
	r, err := Run(t.Context(), Config{URL: srv.URL, Clients: 1, Duration: 300 * time.Millisecond, Rate: 200})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests+r.Unsent != 60 || r.Unsent == 0 {
		t.Errorf("%d sent, %d unsent; want 60 scheduled, some unsent", r.Requests, r.Unsent)
	}
	if r.Max < 40*time.Millisecond {
		t.Errorf("max latency %v: a queued request waits for those before it", r.Max)
	}
	if r.Elapsed != 300*time.Millisecond {
		t.Errorf("elapsed %v, want the schedule's 300ms", r.Elapsed)
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{
		{URL: "http://127.0.0.1:1/", Clients: 0, Duration: time.Second},
		{URL: "http://127.0.0.1:1/", Clients: 1},
		{URL: "http://127.0.0.1:1/", Clients: 1, Duration: time.Second, Rate: -1},
		{URL: "::", Clients: 1, Duration: time.Second},
	} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("Run(%+v) = nil error", c)
		}
	}
}

func TestProcCPU(t *testing.T) {
	a, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Skip("no /proc:", err)
	}
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := ProcCPU(os.Getpid())
	if err != nil || b <= a {
		t.Errorf("CPU %v then %v (%v): want it to grow while spinning", a, b, err)
	}
	if _, err := procStat(os.Getpid()); err != nil {
		t.Errorf("procStat: %v", err)
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Error("ProcCPU of no process: nil error")
	}
}
