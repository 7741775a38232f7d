package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/rules"
)

func TestConcurrencyConfigParses(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.Parse("gw.yaml", []byte(`
upstream: builtin:echo
identity:
  trusted_proxies: [10.0.0.0/8]
in_flight: {max: 100, ttl: 1m, retry_after: 2s}
shedding:
  priority_header: X-Priority
  tiers: {sandbox: test}
  utilization: {capacity: 64, threshold: 0.75, ramp: 60s}
  fleet: {cap: 1000, reserved: 0.3, ttl: 20s}
routes:
  - path: /v1/charges
    priority: critical
    in_flight: {max: 10}
    adaptive: {algorithm: vegas, initial: 10, max: 100}
  - path: /v1/exports
    in_flight: {max: 0}
  - path: /
`))
	if err != nil {
		t.Fatal(err)
	}
	if f := cfg.InFlight; f == nil || f.Max != 100 || f.TTL != time.Minute || f.RetryAfter != 2*time.Second {
		t.Errorf("in_flight %+v", f)
	}
	s := cfg.Shedding
	if s == nil || strings.Join(s.Classes, ",") != "test,get,post,critical" || s.PriorityHeader != "X-Priority" ||
		s.Tiers["sandbox"] != "test" || s.Methods["GET"] != "get" || s.Methods["DELETE"] != "post" || s.DefaultClass != "post" {
		t.Fatalf("shedding %+v", s)
	}
	if u := s.Utilization; u == nil || u.Capacity != 64 || u.Threshold != 0.75 || u.Ramp != time.Minute {
		t.Errorf("utilization %+v", u)
	}
	if f := s.Fleet; f == nil || f.Cap != 1000 || f.Reserved != 0.3 || f.TTL != 20*time.Second {
		t.Errorf("fleet %+v", f)
	}
	r := cfg.Routes[0]
	if r.Priority != "critical" || r.InFlight.Max != 10 || r.Adaptive == nil || r.Adaptive.Algorithm != "vegas" || r.Adaptive.Max != 100 {
		t.Errorf("route 0: %+v %+v %+v", r, r.InFlight, r.Adaptive)
	}
	if cfg.Routes[1].InFlight.Max != 0 {
		t.Errorf("route 1 in_flight %+v, want max 0 (off)", cfg.Routes[1].InFlight)
	}
	// Stripe's reserve is the default.
	cfg, err = gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\nshedding: {fleet: {cap: 10}}\nroutes: [{path: /}]\n"))
	if err != nil || cfg.Shedding.Fleet.Reserved != 0.2 {
		t.Errorf("default reserve: %+v %v, want 0.2", cfg.Shedding.Fleet, err)
	}
}

// Every problem is reported with its file:line, and sluice check (which
// validates through gateway.Check) refuses what serve refuses.
func TestConcurrencyConfigProblems(t *testing.T) {
	t.Parallel()
	src := `upstream: builtin:echo
in_flight: {ttl: 0s}
shedding:
  classes: [bulk, bulk]
  priority_header: X-Priority
routes:
  - path: /a
    priority: vip
    in_flight: {max: -1}
    adaptive: {algorithm: aimd, min: 50, max: 10}
`
	src2 := `upstream: builtin:echo
shedding:
  classes: [test, get, post, critical]
  tiers: {sandbox: nope}
  methods: {GET: get, FETCH: post}
  default_class: vip
  utilization: {capacity: 0, threshold: 0.9, full: 0.8}
  fleet: {cap: 10, reserved: 1.5, critical_from: vip, key: "a{b}"}
routes:
  - path: /a
    priority: vip
`
	src3 := `upstream: builtin:echo
shedding: {classes: [a, b]}
routes:
  - {path: /, priority: a}
  - {path: /b, priority: a, in_flight: {max: 5}}
`
	src4 := `upstream: builtin:echo
routes:
  - {path: /, priority: critical}
`
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{src, []string{
			`gw.yaml:2: in_flight.ttl: want a positive duration`,
			`gw.yaml:2: in_flight.max: missing max`,
			`gw.yaml:4: shedding.classes: class "bulk" named twice`,
			`gw.yaml:5: shedding.priority_header: the priority header is believed only from identity.trusted_proxies`,
			`gw.yaml:9: routes[0].in_flight.max: want a whole number from 0 to 1073741824, got "-1"`,
			`gw.yaml:10: routes[0].adaptive.algorithm: want gradient or vegas`,
			`gw.yaml:10: routes[0].adaptive: want min ≤ initial ≤ max, got 50, 50, 10`,
		}},
		{src2, []string{
			`gw.yaml:4: shedding.tiers.sandbox: no class "nope"`,
			`gw.yaml:5: shedding.methods: unknown HTTP method "FETCH"`,
			`gw.yaml:6: shedding.default_class: no class "vip"`,
			`gw.yaml:7: shedding.utilization.capacity: want a whole number from 1`,
			`gw.yaml:7: shedding.utilization.full: full utilization 0.8 must be above the threshold 0.9`,
			`gw.yaml:8: shedding.fleet.reserved: want a number from 0 to 0.99, got "1.5"`,
			`gw.yaml:8: shedding.fleet.key: want a non-empty key without { or }`,
			`gw.yaml:8: shedding.fleet.critical_from: no class "vip"`,
			`gw.yaml:11: routes[0].priority: no class "vip" (classes: test, get, post, critical)`,
		}},
		{src3, []string{`gw.yaml:2: shedding: shedding sheds nothing without utilization or fleet`}},
		{src4, []string{`gw.yaml:3: routes[0].priority: a route priority needs a shedding section`}},
	} {
		_, err := gateway.Parse("gw.yaml", []byte(tc.src))
		var errs *rules.Errors
		if !errors.As(err, &errs) {
			t.Fatalf("Parse = %v, want *rules.Errors", err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("missing %q in:\n%v", w, err)
			}
		}
		if cerr := gateway.Check("gw.yaml", []byte(tc.src)); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("Check = %v, want the same problems as Parse", cerr)
		}
	}
}

// slowUpstream is a real upstream: requests to a path under /slow are
// held until release is closed (or the test ends); others answer at once.
type slowUpstream struct {
	*httptest.Server
	priority atomic.Value // the X-Sluice-Priority of the last request
	entered  chan string
	release  chan struct{}
	once     sync.Once
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	u := &slowUpstream{entered: make(chan string, 1000), release: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.priority.Store(r.Header.Get("X-Sluice-Priority"))
		if strings.Contains(r.URL.Path, "/slow") {
			u.entered <- r.URL.Path
			select {
			case <-u.release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(func() { u.Release(); u.Close() })
	return u
}

func (u *slowUpstream) Release() { u.once.Do(func() { close(u.release) }) }

// startWith serves cfg (with the test keys) with opts, like start.
func startWith(t *testing.T, cfg string, opts gateway.Options) *server {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(file, []byte(cfg), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "keys.txt"), []byte(testKeys), 0o644))
	c, err := gateway.ParseFile(file)
	must(t, err)
	g, err := gateway.New(t.Context(), c, opts)
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{g: g, url: "http://" + ln.Addr().String(), admin: "http://" + adm.Addr().String(),
		dir: dir, file: file, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- g.Serve(ctx, ln, adm) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// generous are rate limits that never deny in these tests.
const generous = `
rules:
  domain: t
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 100000}
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: hour, requests_per_unit: 100000}
`

func do(t *testing.T, c *http.Client, method, url string, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	must(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	return resp{res.StatusCode, res.Header, string(b)}
}

// GitHub's 100 concurrent requests per user, through the gateway against
// a real slow upstream: alice's 100 requests are in flight, her 101st is
// answered 429 (GitHub answers its secondary limits 403 or 429; sluice
// answers 429: the caller's own traffic is over, the server is not
// short), from any of her IPs; bob is not affected; when her requests end
// her slots come back.
func TestInFlight100PerUserE2E(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	s := start(t, "", fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
identity:
  api_keys_file: keys.txt
in_flight: {max: 100, retry_after: 3s}
routes:
  - path: /
    rate_limits:
      - actions:
          - identity: {}
%s`, up.URL, generous))
	c := clientFrom(t, "127.0.0.2")
	var wg sync.WaitGroup
	held := make(chan resp, 100)
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); held <- do(t, c, "GET", s.url+"/slow", "X-API-Key", "key-alice") }()
	}
	for range 100 {
		<-up.entered
	}
	r := get(t, clientFrom(t, "127.0.0.3"), s.url+"/fast", "X-API-Key", "key-alice")
	if r.code != 429 || r.h.Get("Retry-After") != "3" || r.h.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("alice's 101st request: %d %v, want 429 with Retry-After 3 and problem+json", r.code, r.h)
	}
	var p httplimit.Problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.Policy != "in-flight" {
		t.Errorf("problem %s: want policy in-flight", r.body)
	}
	if pol := strings.Join(r.h.Values("RateLimit-Policy"), ", "); !strings.Contains(pol, `"in-flight";q=100;qu="concurrent-requests"`) {
		t.Errorf("RateLimit-Policy %q lacks the in-flight policy", pol)
	}
	if r := get(t, c, s.url+"/fast", "X-API-Key", "key-bob"); r.code != 200 || !strings.Contains(strings.Join(r.h.Values("RateLimit"), ", "), `"in-flight";r=99`) {
		t.Errorf("bob while alice is at her cap: %d RateLimit %q, want 200 r=99", r.code, r.h.Values("RateLimit"))
	}
	up.Release()
	wg.Wait()
	close(held)
	for r := range held {
		if r.code != 200 {
			t.Errorf("held request: %d %s", r.code, r.body)
		}
	}
	if r := get(t, c, s.url+"/fast", "X-API-Key", "key-alice"); r.code != 200 || !strings.Contains(strings.Join(r.h.Values("RateLimit"), ", "), `"in-flight";r=99`) {
		t.Errorf("alice after her requests ended: %d RateLimit %q, want 200 r=99", r.code, r.h.Values("RateLimit"))
	}
	m := get(t, c, s.admin+"/metrics").body
	for _, want := range []string{`sluice_gateway_in_flight_decisions_total{outcome="allowed"} 102`, `sluice_gateway_in_flight_decisions_total{outcome="denied"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The utilization shedder through the gateway, on the gateway's clock
// (Options.Now): 10 workers, all busy with long requests; a traffic mix
// of 30% critical (POST /v1/charges), 30% POST, 20% GET and 20% test mode
// (a header set by the trusted proxy) is shed lowest class first as the
// amount ramps up, and every critical request succeeds.
func TestShedderLowestClassFirstE2E(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := startWith(t, fmt.Sprintf(`
upstream: %s
identity:
  trusted_proxies: [127.0.0.1]
shedding:
  priority_header: X-Sluice-Priority
  retry_after: 2s
  utilization: {capacity: 10, ramp: 10s}
routes:
  - path: /v1/charges
    priority: critical
  - path: /
%s`, up.URL, generous), gateway.Options{Now: clock})
	c := clientFrom(t, "127.0.0.1")
	long := &http.Client{} // no timeout: these last until the upstream lets them go
	t.Cleanup(long.CloseIdleConnections)
	// Ten long requests: 3 critical, 7 GETs.
	var wg sync.WaitGroup
	for i := range 10 {
		path := "/v1/slow"
		if i < 3 {
			path = "/v1/charges/slow"
		}
		wg.Add(1)
		go func() { defer wg.Done(); do(t, long, "GET", s.url+path) }()
		<-up.entered
	}
	type class struct {
		name   string
		method string
		path   string
		hdr    []string
		share  int // of 10
	}
	mix := []class{
		{"test", "GET", "/v1/items", []string{"X-Sluice-Priority", "test"}, 2},
		{"get", "GET", "/v1/items", nil, 2},
		{"post", "POST", "/v1/items", nil, 3},
		{"critical", "POST", "/v1/charges", nil, 3},
	}
	shedRate := map[string][]float64{}
	for second := 1; second <= 12; second++ {
		advance(time.Second)
		shed := map[string]int{}
		for range 10 { // 100 requests a second, in the mix
			for _, cl := range mix {
				for range cl.share {
					r := do(t, c, cl.method, s.url+cl.path, cl.hdr...)
					switch r.code {
					case 200:
					case 503:
						shed[cl.name]++
						if r.h.Get("Retry-After") != "2" || !strings.Contains(r.body, `\"`+cl.name+`\"`) {
							t.Fatalf("%s shed: Retry-After %q body %s", cl.name, r.h.Get("Retry-After"), r.body)
						}
					default:
						t.Fatalf("%s: %d %s", cl.name, r.code, r.body)
					}
				}
			}
		}
		for _, cl := range mix {
			shedRate[cl.name] = append(shedRate[cl.name], float64(shed[cl.name])/float64(10*cl.share))
		}
	}
	for i := range shedRate["test"] {
		te, g, p, cr := shedRate["test"][i], shedRate["get"][i], shedRate["post"][i], shedRate["critical"][i]
		if cr != 0 {
			t.Errorf("second %d: %.0f%% of critical requests shed, want none", i+1, 100*cr)
		}
		if (g > 0 && te < 1) || (p > 0 && g < 1) || te < g || g < p {
			t.Errorf("second %d: shed test %.2f get %.2f post %.2f: a class shed before the one below it", i+1, te, g, p)
		}
	}
	last := len(shedRate["test"]) - 1
	if shedRate["test"][last] != 1 || shedRate["get"][last] != 1 || shedRate["post"][last] == 0 {
		t.Errorf("after the ramp: shed test %v get %v post %v, want test and GETs all shed, POSTs in part",
			shedRate["test"][last], shedRate["get"][last], shedRate["post"][last])
	}
	t.Logf("shed fraction per second: test %.2f\nget %.2f\npost %.2f\ncritical %.2f", shedRate["test"], shedRate["get"], shedRate["post"], shedRate["critical"])
	m := get(t, c, s.admin+"/metrics").body
	if strings.Contains(m, `sluice_gateway_shed_decisions_total{class="critical",outcome="denied",shedder="utilization"}`) ||
		!strings.Contains(m, `sluice_gateway_shed_decisions_total{class="test",outcome="denied",shedder="utilization"} `) ||
		!strings.Contains(m, "sluice_gateway_shed_amount ") {
		t.Errorf("metrics: want test denials, no critical denial, and the shed amount gauge")
	}
	// The load goes: the amount comes down, and every class is served.
	up.Release()
	wg.Wait()
	for range 60 {
		advance(10 * time.Second)
		do(t, c, "GET", s.url+"/v1/items")
	}
	if r := do(t, c, "GET", s.url+"/v1/items", "X-Sluice-Priority", "test"); r.code != 200 {
		t.Errorf("test traffic after the load went: %d, want 200", r.code)
	}
}

// Two gateways share one fleet cap in a real redis-server: 4 slots, half
// reserved for critical requests. Two GETs held on gateway A fill the
// general share, so a GET on gateway B is shed and a critical request on
// B is not; when A's requests end, B's GETs pass again.
func TestFleetCapSharedByTwoGatewaysRedisE2E(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	up := newSlowUpstream(t)
	cfg := fmt.Sprintf(`
upstream: %s
store: %s
shedding:
  fleet: {cap: 4, reserved: 0.5, key: "fleet-test"}
routes:
  - path: /v1/charges
    priority: critical
  - path: /
%s`, up.URL, rs.URL(), generous)
	a := startWith(t, cfg, gateway.Options{})
	b := startWith(t, cfg, gateway.Options{})
	c := clientFrom(t, "127.0.0.2")
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- do(t, c, "GET", a.url+"/v1/slow").code }()
		<-up.entered
	}
	if r := do(t, c, "GET", b.url+"/v1/items"); r.code != 503 || r.h.Get("Retry-After") != "1" {
		t.Fatalf("GET on B with the general share full on A: %d %s, want 503 with Retry-After 1", r.code, r.body)
	}
	for range 2 {
		if r := do(t, c, "POST", b.url+"/v1/charges"); r.code != 200 {
			t.Fatalf("critical POST on B: %d %s, want 200 from the reserve", r.code, r.body)
		}
	}
	up.Release()
	wg.Wait()
	for range 2 {
		if code := <-codes; code != 200 {
			t.Errorf("held GET on A: %d", code)
		}
	}
	if r := do(t, c, "GET", b.url+"/v1/items"); r.code != 200 {
		t.Errorf("GET on B after A's requests ended: %d %s, want 200", r.code, r.body)
	}
}

// A route's adaptive limit is built and serves through the gateway.
func TestAdaptiveRouteE2E(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	s := start(t, "", fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
routes:
  - path: /
    adaptive: {algorithm: gradient, initial: 2, min: 1, max: 2}
`, up.URL))
	c := clientFrom(t, "127.0.0.2")
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); do(t, c, "GET", s.url+"/slow") }()
		<-up.entered
	}
	if r := do(t, c, "GET", s.url+"/fast"); r.code != 503 || r.h.Get("Retry-After") == "" {
		t.Errorf("third request at an adaptive limit of 2: %d %v, want 503 with Retry-After", r.code, r.h)
	}
	m := get(t, c, s.admin+"/metrics").body
	for _, want := range []string{`sluice_gateway_adaptive_limit{route="routes[0] /"} 2`, `sluice_gateway_adaptive_in_flight{route="routes[0] /"} 2`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	up.Release()
	wg.Wait()
	if r := do(t, c, "GET", s.url+"/fast"); r.code != 200 {
		t.Errorf("after the requests ended: %d", r.code)
	}
}

// FuzzConcurrencyConfig: the concurrency sections, mangled, give a config
// or every problem with its line, never a panic; a config that parses
// builds a gateway.
func FuzzConcurrencyConfig(f *testing.F) {
	f.Add([]byte("upstream: builtin:echo\nin_flight: {max: 100}\nshedding: {utilization: {capacity: 10}, fleet: {cap: 10, reserved: 0.2}}\nroutes: [{path: /, priority: critical, adaptive: {algorithm: vegas}}]\n"))
	f.Add([]byte("upstream: builtin:echo\nshedding: {classes: [a, b, c], default_class: b, methods: {GET: a}, tiers: {x: c}, fleet: {cap: 3, critical_from: b}}\nroutes: [{path: /, in_flight: {max: 0}}]\n"))
	f.Add([]byte("upstream: builtin:echo\nshedding: {classes: [], tiers: [1], methods: 7, utilization: {capacity: 1, threshold: .nan}}\nroutes: [{path: /, priority: [x]}]\n"))
	f.Add([]byte("upstream: builtin:echo\nshedding: {utilization: {capacity: 5, threshold: 1e309, full: -0}}\nroutes: [{path: /, adaptive: {min: 9, initial: 3}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := gateway.Parse("fuzz.yaml", data)
		if err != nil {
			var errs *rules.Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("Parse error %v is not a non-empty *rules.Errors", err)
			}
			return
		}
		if cfg.Shedding == nil && !strings.Contains(string(data), "adaptive") && cfg.InFlight == nil {
			return
		}
		g, err := gateway.New(t.Context(), cfg, gateway.Options{})
		if err != nil {
			t.Fatalf("a config that parses does not build: %v", err)
		}
		g.Close()
	})
}

// A client cannot raise its own priority: the priority header is believed
// only from a trusted proxy. With every GET being shed, a GET from an
// untrusted peer that claims to be critical is shed too, and the same
// header from the trusted proxy is served.
func TestPriorityHeaderOnlyFromTrustedProxyE2E(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := startWith(t, fmt.Sprintf(`
upstream: %s
identity:
  trusted_proxies: [127.0.0.1]
shedding:
  priority_header: X-Sluice-Priority
  utilization: {capacity: 2, threshold: 0.4, full: 1.4, ramp: 1s}
routes:
  - path: /
`, up.URL), gateway.Options{Now: clock})
	long := &http.Client{}
	t.Cleanup(long.CloseIdleConnections)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); do(t, long, "POST", s.url+"/slow", "X-Sluice-Priority", "critical") }()
		<-up.entered
	}
	trusted, client := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	// Two updates: the second measures 2 of 2 busy (utilization 1, target
	// (1-0.4)/(1.4-0.4) = 0.6), and the ramp of one interval jumps there:
	// test and GETs all shed, POSTs 40%, critical none.
	for range 2 {
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		do(t, trusted, "GET", s.url+"/fast", "X-Sluice-Priority", "critical")
	}
	if r := do(t, client, "GET", s.url+"/fast", "X-Sluice-Priority", "critical"); r.code != 503 {
		t.Errorf("untrusted GET claiming critical: %d, want 503 (shed as the GET it is)", r.code)
	}
	if r := do(t, client, "GET", s.url+"/fast"); r.code != 503 {
		t.Errorf("untrusted GET: %d, want 503", r.code)
	}
	if r := do(t, trusted, "GET", s.url+"/fast", "X-Sluice-Priority", "critical"); r.code != 200 || up.priority.Load() != "critical" {
		t.Errorf("GET the trusted proxy says is critical: %d, upstream saw %q; want 200, critical", r.code, up.priority.Load())
	}
	// An untrusted peer's priority header does not reach the upstream.
	if r := do(t, client, "POST", s.url+"/fast", "X-Sluice-Priority", "critical"); r.code == 200 && up.priority.Load() != "" {
		t.Errorf("upstream saw the untrusted peer's priority %q", up.priority.Load())
	}
	up.Release()
	wg.Wait()
}

// Redis down when the gateway starts does not keep it from starting: the
// in-flight cap answers with on_store_error (allow) until Redis is back,
// then holds again.
func TestInFlightRedisDownAtStartE2E(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rs.Kill()
	up := newSlowUpstream(t)
	s := startWith(t, fmt.Sprintf(`
upstream: %s
store: %s
on_store_error: allow
in_flight: {max: 1}
routes:
  - path: /
`, up.URL, rs.URL()), gateway.Options{})
	c := clientFrom(t, "127.0.0.2")
	for range 3 {
		if r := do(t, c, "GET", s.url+"/fast"); r.code != 200 {
			t.Fatalf("Redis down, on_store_error allow: %d %s, want 200", r.code, r.body)
		}
	}
	must(t, rs.Restart())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer up.Release()
	long := &http.Client{}
	t.Cleanup(long.CloseIdleConnections)
	// The store reconnects at most once a second: poll until a slow
	// request holds the caller's only slot and the next one is refused.
	deadline := time.Now().Add(20 * time.Second)
	for {
		res := make(chan int, 1)
		wg.Add(1)
		go func() { defer wg.Done(); res <- do(t, long, "GET", s.url+"/slow").code }()
		select {
		case <-up.entered: // admitted (with a lease, or without while Redis is away)
			if r := do(t, c, "GET", s.url+"/fast"); r.code == 429 {
				return
			}
		case code := <-res: // refused: an earlier slow request holds the slot in Redis
			if code == 429 {
				return
			}
			t.Fatalf("slow request: %d", code)
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis back for 20 s and the in-flight cap still not enforced")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A reload that leaves the utilization settings alone keeps the shedder:
// what is in flight is still counted.
func TestReloadKeepsTheUtilizationShedder(t *testing.T) {
	t.Parallel()
	up := newSlowUpstream(t)
	cfg := fmt.Sprintf("upstream: %s\nshedding: {utilization: {capacity: 10}}\nroutes:\n  - path: /\n", up.URL)
	s := startWith(t, cfg, gateway.Options{})
	long := &http.Client{}
	t.Cleanup(long.CloseIdleConnections)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); do(t, long, "GET", s.url+"/slow") }()
		<-up.entered
	}
	c := clientFrom(t, "127.0.0.2")
	inFlight := func() string {
		for _, l := range strings.Split(get(t, c, s.admin+"/metrics").body, "\n") {
			if strings.HasPrefix(l, "sluice_gateway_utilization_in_flight ") {
				return strings.TrimPrefix(l, "sluice_gateway_utilization_in_flight ")
			}
		}
		return "absent"
	}
	if got := inFlight(); got != "3" {
		t.Fatalf("in flight before the reload: %s, want 3", got)
	}
	must(t, os.WriteFile(s.file, []byte(cfg+"  - path: /v2/\n"), 0o644))
	must(t, s.g.ReloadFile(s.file))
	if got := inFlight(); got != "3" {
		t.Errorf("in flight after a reload that kept the shedder's settings: %s, want 3", got)
	}
	up.Release()
	wg.Wait()
	if got := inFlight(); got != "0" {
		t.Errorf("in flight after the requests ended: %s, want 0", got)
	}
}

// The in-flight store uses the rate limit store's client and link: in_flight
// opens no connection of its own to Redis (it used to dial a second client
// on the same URL, with a breaker of its own). On a Cluster of one node the
// client keeps exactly one connection to it (a standalone client
// multiplexes over up to four, opened as load needs them, which made the
// count depend on the machine's load); in-flight leases on many keys then
// add none.
func TestInFlightSharesTheRateStoreClientE2E(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 1)
	rs := cl.Masters()[0]
	up := newSlowUpstream(t)
	s := startWith(t, fmt.Sprintf(`
upstream: %s
store: %s
routes:
  - path: /fast
    rate_limits:
      - actions: [{request_headers: {header_name: X-Key, descriptor_key: k}}]
  - path: /
    in_flight: {max: 5}
rules:
  domain: t
  descriptors:
    - key: k
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 1000}
`, up.URL, cl.URL()), gateway.Options{})
	clients := func() int {
		v, err := rs.Do("CLIENT", "LIST")
		must(t, err)
		return strings.Count(v.(string), "\n") - 1 // not this inspection's own
	}
	c := clientFrom(t, "127.0.0.2")
	for i := range 64 {
		if r := do(t, c, "GET", s.url+"/fast", "X-Key", fmt.Sprint("key", i)); r.code != 200 {
			t.Fatalf("GET /fast: %d %s", r.code, r.body)
		}
	}
	before := clients()
	for i := range 32 {
		if r := do(t, clientFrom(t, fmt.Sprint("127.0.1.", i+1)), "GET", s.url+"/other"); r.code != 200 {
			t.Fatalf("GET /other: %d %s", r.code, r.body)
		}
	}
	// A slow request holds its lease in Redis.
	long := &http.Client{}
	t.Cleanup(long.CloseIdleConnections)
	done := make(chan int, 1)
	go func() { done <- do(t, long, "GET", s.url+"/slow").code }()
	<-up.entered
	n, err := rs.Do("KEYS", "*if{*")
	up.Release()
	if code := <-done; code != 200 {
		t.Errorf("GET /slow: %d", code)
	}
	if err != nil || len(n.([]any)) == 0 {
		t.Fatalf("no in-flight key in Redis (%v, %v): the leases did not go to Redis", n, err)
	}
	if after := clients(); after != before {
		v, _ := rs.Do("CLIENT", "LIST")
		t.Errorf("%d connections to Redis after in-flight requests, %d before: the in-flight store opened its own\n%v", after, before, v)
	}
}
