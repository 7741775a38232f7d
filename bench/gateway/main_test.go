package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/gateway/loadgen"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// requireServers skips without nginx or redis-server, or fails under
// CI=true (scripts/test installs both).
func requireServers(t *testing.T) {
	t.Helper()
	if _, err := nginxBinary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (required under CI=true; scripts/test installs it)", err)
		}
		t.Skip(err)
	}
	redistest.Require(t)
}

// TestSideBySide checks the harness, not the speed: a tiny run of every
// contender against the real upstream, then a tiny sweep. Every contender
// answers without errors or denials, the CPU of each process is read,
// only the limiting sluice contenders set RateLimit headers, the tables
// name every contender, and nothing is left running.
func TestSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice and starts nginx, redis-server and five proxies")
	}
	requireServers(t)
	o := options{
		contenders: []string{kindNginx, kindGoProxy, kindSluiceOff, kindSluiceOn, kindSluiceRedis, kindSluicePrefetch, kindGoPlain},
		clients:    4, openConns: 4,
		dur: 200 * time.Millisecond, warmup: 20 * time.Millisecond, rounds: 2,
		tools: []string{toolGo}, idle: 8, path: "/hello", progress: io.Discard,
	}
	ctx := t.Context()
	e, err := setup(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, c := range e.contenders {
		pids = append(pids, c.p.pid())
	}
	pids = append(pids, e.upstream.pid(), e.redis.Pid())
	defer func() {
		e.close()
		for _, pid := range pids {
			if _, err := loadgen.ProcCPU(pid); err == nil {
				t.Errorf("pid %d still running after close", pid)
			}
		}
	}()
	res, err := compare(ctx, e, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range e.names() {
		rs := res.rounds[toolGo][n]
		if len(rs) != o.rounds {
			t.Fatalf("%s: %d rounds, want %d", n, len(rs), o.rounds)
		}
		s := summarize(rs)
		if s.rps == 0 || s.errors != 0 || s.denied != 0 {
			t.Errorf("%s: %.0f req/s, %d errors, %d denied; want some, none, none (first error %q)", n, s.rps, s.errors, s.denied, rs[0].FirstErr)
		}
		if s.proxy == 0 || s.upstream == 0 {
			t.Errorf("%s: proxy CPU %.1f µs/req, upstream %.1f; want both read", n, s.proxy, s.upstream)
		}
		limits := n == kindSluiceOn || n == kindSluiceRedis || n == kindSluicePrefetch
		if s.headers != limits {
			t.Errorf("%s: RateLimit headers %v, want %v", n, s.headers, limits)
		}
		if n != kindSluicePrefetch && (s.rds > 0) != (n == kindSluiceRedis) {
			t.Errorf("%s: redis CPU %.1f µs/decision; want it read for sluice-redis only", n, s.rds)
		}
	}
	tab := res.table(toolGo) + res.ratios(toolGo)
	for _, want := range []string{"| nginx |", "| sluice-redis |", "| sluice-on / goproxy |", "| sluice-on / nginx |", "| sluice-on / sluice-off |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}

	// The sweep: a fixed capacity of 100 req/s, offered at 50%.
	o.rates, o.capacity, o.rounds = []float64{50}, 100, 1
	pts, err := sweep(ctx, e, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].rate != 50 || pts[1].rate != 0 {
		t.Fatalf("sweep points %+v; want 50/s then saturation", pts)
	}
	for _, n := range e.names() {
		r := pts[0].rounds[n][0]
		// 50/s for 200 ms: 10 scheduled, each sent or counted unsent.
		if r.Requests+r.Unsent != 10 || r.Errors != 0 {
			t.Errorf("%s at 50/s: %d sent + %d unsent, %d errors; want 10 scheduled, no errors", n, r.Requests, r.Unsent, r.Errors)
		}
	}
	tab = sweepTable(pts, e.names())
	if !strings.Contains(tab, "| 50% (50/s) | nginx |") || !strings.Contains(tab, "| saturation | nginx |") {
		t.Errorf("sweep table:\n%s", tab)
	}
}

// wrkOutput is wrk 4.1.0's report (Debian's package) of a 2 s run.
const wrkOutput = `Running 2s test @ http://127.0.0.1:38211/hello
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.61ms    3.02ms  36.85ms   78.16%
    Req/Sec     3.58k   512.34     4.60k    70.00%
  Latency Distribution
     50%    3.98ms
     75%    5.80ms
     90%    8.21ms
     99%   15.12ms
  14253 requests in 2.00s, 2.52MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 4
Requests/sec:   7115.33
Transfer/sec:      1.26MB
`

func TestParseWrk(t *testing.T) {
	var r loadgen.Result
	if err := parseWrk([]byte(wrkOutput), &r); err != nil {
		t.Fatal(err)
	}
	want := loadgen.Result{Requests: 14253, Elapsed: 2 * time.Second, P50: 3980 * time.Microsecond,
		P90: 8210 * time.Microsecond, P99: 15120 * time.Microsecond, Errors: 7}
	if r.Requests != want.Requests || r.Elapsed != want.Elapsed || r.P50 != want.P50 || r.P90 != want.P90 || r.P99 != want.P99 || r.Errors != want.Errors {
		t.Errorf("parseWrk = %+v, want %+v", r, want)
	}
	if err := parseWrk([]byte("unable to connect to 127.0.0.1:1 Connection refused\n"), &r); err == nil {
		t.Error("parseWrk accepted a report without a request count")
	}
}

// FuzzParseWrk: no input crashes the parser, and what it accepts has a
// request count that is not negative.
func FuzzParseWrk(f *testing.F) {
	f.Add([]byte(wrkOutput))
	f.Add([]byte("  1 requests in 1.00m, 1B read\n     99%   1.5s\n"))
	f.Add([]byte("  99999999999999999999 requests in 9999999999h, x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r loadgen.Result
		if parseWrk(b, &r) == nil && r.Requests < 0 {
			t.Errorf("negative request count from %q", b)
		}
	})
}

func TestRotated(t *testing.T) {
	cs := []string{"a", "b", "c"}
	for k, want := range []string{"abc", "bca", "cab", "abc"} {
		if got := strings.Join(rotated(cs, k), ""); got != want {
			t.Errorf("rotated(%d) = %s, want %s", k, got, want)
		}
	}
}

// TestProxies checks the contenders of -contenders proxies, not their
// speed: a tiny run of each (nginx, Caddy and Traefik alone and asking
// sluice's decision endpoint, with the examples/proxies configs), every
// one answering without errors or denials, the decision endpoint's CPU
// read for those that ask sluice only, and redis-server's for those on
// it. It builds Caddy and Traefik from the Go module proxy (minutes the
// first time; a contender whose build fails is skipped, as in a run), so
// it runs only with BENCH_GATEWAY_PROXIES=1, never in CI.
func TestProxies(t *testing.T) {
	if os.Getenv("BENCH_GATEWAY_PROXIES") != "1" {
		t.Skip("BENCH_GATEWAY_PROXIES=1 runs it: it builds Caddy and Traefik (minutes)")
	}
	requireServers(t)
	o := options{
		contenders: append(slices.Clone(proxyKinds), kindNginxSluiceRedis),
		clients:    4, dur: 200 * time.Millisecond, warmup: 20 * time.Millisecond, rounds: 2,
		tools: []string{toolGo}, idle: 8, path: "/hello", progress: testWriter{t},
	}
	e, err := setup(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	res, err := compare(t.Context(), e, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range e.names() {
		s := summarize(res.rounds[toolGo][n])
		if s.rps == 0 || s.errors != 0 || s.denied != 0 || s.proxy == 0 || s.upstream == 0 {
			t.Errorf("%s: %.0f req/s, %d errors, %d denied, proxy CPU %.1f, upstream %.1f µs/req; want some, none, none, read, read",
				n, s.rps, s.errors, s.denied, s.proxy, s.upstream)
		}
		if asks := strings.Contains(n, "+sluice"); (s.decision > 0) != asks {
			t.Errorf("%s: decision CPU %.1f µs/req; want it read only for a proxy asking sluice", n, s.decision)
		}
		if (s.rds > 0) != slices.Contains(redisKinds, n) {
			t.Errorf("%s: redis CPU %.1f µs/decision; want it read only for the contenders on Redis", n, s.rds)
		}
	}
	t.Log("\n" + res.table(toolGo) + res.ratios(toolGo))
}

// testWriter writes a harness's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// TestParseContenders: a kind twice is an A/A pair, KIND@base runs the
// -base binary, and @base without -base or on a kind that is not sluice
// serve's is refused.
func TestParseContenders(t *testing.T) {
	cs, err := parseContenders([]string{"goproxy", "sluice-on@base", "sluice-on", "sluice-on@base"}, "/tmp/base")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.name+"="+c.kind+":"+c.bin)
	}
	want := []string{"goproxy=goproxy:", "sluice-on@base=sluice-on:/tmp/base", "sluice-on=sluice-on:", "sluice-on@base#2=sluice-on:/tmp/base"}
	if !slices.Equal(got, want) {
		t.Errorf("contenders %q, want %q", got, want)
	}
	for _, bad := range [][]string{{"sluice-on@base"}, {"nginx@base"}, {"nope"}} {
		base := "/tmp/base"
		if bad[0] == "sluice-on@base" {
			base = ""
		}
		if _, err := parseContenders(bad, base); err == nil {
			t.Errorf("%q with -base %q: no error", bad, base)
		}
	}
}
