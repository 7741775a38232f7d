// Command client compares polite HTTP clients side by side, in one run,
// against the same throttling server: sluice's httpclient,
// hashicorp/go-retryablehttp and failsafe-go's failsafehttp retry policy
// (and, against the GitHub-style server, gofri/go-github-ratelimit, the
// GitHub-specific peer).
//
//	cd bench && go run ./client                 # every scenario, defaults below
//	cd bench && go run ./client -n 1000 -rate 200
//	cd bench && go run ./client -scenarios announced,github
//
// Scenarios:
//
//	retry-after  token bucket, 429 with Retry-After
//	bare         token bucket, bare 429
//	announced    sluice's own gateway (`sluice serve`, a real process):
//	             a fixed window per client announced in the IETF RateLimit
//	             and RateLimit-Policy fields, 429 with Retry-After
//	github       GitHub's REST API's answers: X-RateLimit-* on every answer,
//	             403 with Remaining 0 when the window's quota is spent, and
//	             403 with Retry-After for a secondary limit on concurrency
//
// The server is a token bucket (memstore, the same code sluice's gateway
// uses) on 127.0.0.1: -rate per second, bursts of -burst, answering 429
// when empty, with Retry-After in whole seconds (rounded up, as RFC 9110
// delta-seconds must be) or, in the second scenario, with a bare 429 as
// the 429 guide sluice follows describes (and as nginx limit_req does).
// Each client gets a fresh bucket, its own http.Transport with the same
// settings, the same -concurrency workers and the same -n requests, and
// the same retry caps: 7 attempts, waits from 500 ms up to 60 s.
//
// For each client it prints the 429s the server sent, the time to
// complete every request, and the requests that failed (retries
// exhausted, or gave up), with ratios to sluice.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/sluicehq/sluice/hostlimit"
	"github.com/sluicehq/sluice/httpclient"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.N, "n", cfg.N, "requests per client")
	flag.Int64Var(&cfg.Rate, "rate", cfg.Rate, "server rate, requests per second")
	flag.Int64Var(&cfg.Burst, "burst", cfg.Burst, "server burst")
	flag.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "concurrent requests (workers) per client")
	flag.DurationVar(&cfg.Window, "window", cfg.Window, "window of the announced and github scenarios (their quota is rate × window)")
	scenarios := flag.String("scenarios", "retry-after,bare,announced,bucket,github,envoy", "comma-separated: retry-after, bare, announced, bucket, github, envoy")
	flag.Parse()
	ok := true
	for _, sc := range strings.Split(*scenarios, ",") {
		c := cfg
		c.Scenario = sc
		if announces(sc) && sc != "bucket" {
			c.Burst = 0
		}
		if sc == "bucket" {
			// sluice serve's demo key: a bucket of 20 refilled at 1 a
			// second; 30 URLs.
			c.Rate, c.Burst, c.N = 1, 20, 30
		}
		results, err := Compare(context.Background(), c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		Print(os.Stdout, c, results)
		ok = ok && Target(c, results) == nil
		fmt.Println()
	}
	if !ok {
		os.Exit(1)
	}
}

// announces reports whether the scenario's server announces its budget.
func announces(sc string) bool {
	switch sc {
	case "announced", "bucket", "github", "envoy":
		return true
	}
	return false
}

// Config is one scenario.
type Config struct {
	Scenario    string        // retry-after, bare, announced or github
	N           int           // requests per client
	Rate, Burst int64         // the server's token bucket (announced, github: Rate × Window per window)
	Window      time.Duration // the window of announced and github, whole seconds
	Concurrency int           // workers per client
}

func defaultConfig() Config {
	return Config{Scenario: "retry-after", N: 600, Rate: 100, Burst: 10, Window: 2 * time.Second, Concurrency: 16}
}

// Result is one client's run.
type Result struct {
	Client   string
	Sent     int64 // requests that reached the server (robots.txt aside)
	Code429  int64 // answers refusing for a rate limit: 429s, and the 403s of the github scenario
	Elapsed  time.Duration
	Failed   int // requests that did not end in a 200
	Requests int
	// Schedule is the soonest the announced limit let this run end
	// without a refusal (0 where none is announced).
	Schedule time.Duration
}

// A client under test: does one GET and reports the final status, or an
// error.
type client struct {
	name string
	get  func(ctx context.Context, url string) (int, error)
}

func newTransport() *http.Transport {
	return &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
}

func clients(cfg Config, base func() http.RoundTripper) []client {
	do := func(c *http.Client) func(ctx context.Context, url string) (int, error) {
		return func(ctx context.Context, url string) (int, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return 0, err
			}
			resp, err := c.Do(req)
			if err != nil {
				return 0, err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode, nil
		}
	}

	// sluice: the defaults (AIMD from 2/s, recommended backoff, 7 attempts,
	// 60 s cap, budget, breaker), with as many requests in flight per host
	// as the peers have workers (GitHub's API, as its guide asks, gets
	// one at a time whatever that says).
	sl := httpclient.NewClient(httpclient.Options{Transport: base(), Concurrency: cfg.Concurrency})

	// go-retryablehttp: its default policy and backoff (which honours
	// Retry-After on 429/503), with the same caps.
	rh := retryablehttp.NewClient()
	rh.HTTPClient = &http.Client{Transport: base()}
	rh.Logger = nil
	rh.RetryMax = 6
	rh.RetryWaitMin = 500 * time.Millisecond
	rh.RetryWaitMax = 60 * time.Second
	rh.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rhGet := func(ctx context.Context, url string) (int, error) {
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := rh.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// failsafe-go: failsafehttp's retry policy (retries 429 and 5xx,
	// honours Retry-After), exponential backoff with ±50% jitter, the same
	// caps, returning the last answer when attempts run out.
	policy := failsafehttp.NewRetryPolicyBuilder().
		WithMaxAttempts(7).
		WithBackoff(500*time.Millisecond, 60*time.Second).
		WithJitterFactor(0.5).
		ReturnLastFailure().
		Build()
	fs := &http.Client{Transport: failsafehttp.NewRoundTripper(base(), policy)}

	out := []client{
		{"sluice", do(sl)},
		{"go-retryablehttp", rhGet},
		{"failsafe-go", do(fs)},
	}
	if announces(cfg.Scenario) {
		// sluice spending each announced budget at once, then waiting
		// for its reset (hostlimit.BudgetSpend), rather than pacing it.
		sp := httpclient.NewClient(httpclient.Options{Transport: base(), Concurrency: cfg.Concurrency, BudgetMode: hostlimit.BudgetSpend})
		out = append(out, client{"sluice (spend)", do(sp)})
	}
	if cfg.Scenario == "github" {
		// gofri/go-github-ratelimit: its defaults (secondary limits slept
		// out; a spent primary limit fails requests until its reset, by
		// design), wrapped in the same retry caps as failsafe-go so that
		// a refused request is tried again.
		gh := github_ratelimit.New(base())
		out = append(out, client{"go-github-ratelimit", do(&http.Client{Transport: failsafehttp.NewRoundTripper(gh, policy)})})
	}
	return out
}

// server is the throttling server: one token bucket for everyone.
type server struct {
	store      *memstore.Store
	limit      ratelimit.Limit
	retryAfter bool
	sent, n429 atomic.Int64
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.sent.Add(1)
	d, err := s.store.Apply(r.Context(), ratelimit.Request{Key: "all", Limit: s.limit, Algorithm: ratelimit.TokenBucket, N: 1})
	if err != nil || !d.Allowed {
		s.n429.Add(1)
		if s.retryAfter {
			w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.DurationCeil(d.RetryAfter), 10))
		}
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down\n")
		return
	}
	io.WriteString(w, "ok\n")
}

// Compare runs every client against a fresh server of cfg, one after the
// other, and returns their results, sluice first.
func Compare(ctx context.Context, cfg Config) ([]Result, error) {
	var counters []*counting
	base := func() http.RoundTripper {
		c := &counting{base: newTransport()}
		counters = append(counters, c)
		return c
	}
	var out []Result
	for _, c := range clients(cfg, base) {
		var tg target
		switch cfg.Scenario {
		case "retry-after", "bare":
			tg = newBucketTarget(cfg)
		case "github":
			tg = newGitHubTarget(cfg)
		case "envoy":
			tg = newEnvoyTarget(cfg)
		case "announced", "bucket":
			g, err := newGatewayTarget(cfg)
			if err != nil {
				return nil, err
			}
			tg = g
		default:
			return nil, fmt.Errorf("unknown scenario %q", cfg.Scenario)
		}
		start := time.Now()
		r := run(ctx, cfg, c, tg.URL())
		r.Schedule = tg.Schedule(start, cfg.N)
		tg.Close()
		out = append(out, r)
	}
	// Each client's counters are those its transports were built with:
	// clients() builds them in order, one base each.
	for i := range out {
		out[i].Sent, out[i].Code429 = counters[i].sent.Load(), counters[i].refused.Load()
	}
	return out, nil
}

func run(ctx context.Context, cfg Config, c client, url string) Result {
	jobs := make(chan int)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Concurrency {
		wg.Go(func() {
			for i := range jobs {
				code, err := c.get(ctx, fmt.Sprintf("%s/item/%d", url, i))
				if err != nil || code != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	for i := range cfg.N {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return Result{Client: c.name, Elapsed: time.Since(start), Failed: int(failed.Load()), Requests: cfg.N}
}

// Target checks sluice's result against its targets. Against the token
// buckets: at most a fifth of the best peer's 429s, no slower than the
// fastest peer that lost nothing, none lost. Against a server that
// announces its budget (announced, bucket, envoy, github): nothing
// refused, within 5% (+100 ms) of the schedule the announced limit
// allows, no further past it than the best peer that lost nothing, none
// lost.
func Target(cfg Config, rs []Result) error {
	if announces(cfg.Scenario) {
		return announcedTarget(rs)
	}
	s := rs[0]
	var problems []string
	best429 := int64(-1)
	var fastest time.Duration
	for _, p := range rs[1:] {
		if best429 < 0 || p.Code429 < best429 {
			best429 = p.Code429
		}
		if p.Failed == 0 && (fastest == 0 || p.Elapsed < fastest) {
			fastest = p.Elapsed
		}
	}
	if s.Failed != 0 {
		problems = append(problems, fmt.Sprintf("sluice lost %d requests", s.Failed))
	}
	if s.Code429*5 > best429 {
		problems = append(problems, fmt.Sprintf("sluice got %d 429s, more than a fifth of the best peer's %d", s.Code429, best429))
	}
	if fastest > 0 && s.Elapsed > fastest {
		problems = append(problems, fmt.Sprintf("sluice took %v, slower than the fastest peer (%v)", s.Elapsed, fastest))
	}
	if problems != nil {
		return fmt.Errorf("target missed: %s", strings.Join(problems, "; "))
	}
	return nil
}

// scheduleSlack is what a run may take beyond 5% of its schedule: the
// last batch's own sending on loopback, and the start.
const scheduleSlack = 100 * time.Millisecond

// excess is how much longer than its schedule r took.
func (r Result) excess() time.Duration { return r.Elapsed - r.Schedule }

func announcedTarget(rs []Result) error {
	s := rs[0]
	var problems []string
	best := time.Duration(-1)
	for _, p := range rs[1:] {
		if p.Failed == 0 && (best < 0 || p.excess() < best) {
			best = p.excess()
		}
	}
	if s.Failed != 0 {
		problems = append(problems, fmt.Sprintf("sluice lost %d requests", s.Failed))
	}
	if s.Code429 != 0 {
		problems = append(problems, fmt.Sprintf("sluice was refused %d of %d requests (want 0)", s.Code429, s.Sent))
	}
	if limit := s.Schedule + s.Schedule/20 + scheduleSlack; s.Elapsed > limit {
		problems = append(problems, fmt.Sprintf("sluice took %v, more than its schedule %v + 5%% + %v", s.Elapsed.Round(time.Millisecond), s.Schedule.Round(time.Millisecond), scheduleSlack))
	}
	if best >= 0 && s.excess() > best+scheduleSlack {
		problems = append(problems, fmt.Sprintf("sluice took %v past its schedule, the best peer that lost nothing %v", s.excess().Round(time.Millisecond), best.Round(time.Millisecond)))
	}
	if problems != nil {
		return fmt.Errorf("target missed: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Print writes the results as a table with ratios to sluice.
func Print(w io.Writer, cfg Config, rs []Result) {
	switch cfg.Scenario {
	case "announced":
		fmt.Fprintf(w, "server: sluice serve, fixed window of %d per %v per client, IETF RateLimit headers, 429 + Retry-After; %d requests per client, %d concurrent\n\n",
			cfg.Rate*int64(cfg.Window/time.Second), cfg.Window, cfg.N, cfg.Concurrency)
	case "bucket":
		fmt.Fprintf(w, "server: sluice serve, token bucket of %d refilled at %d/s per client, IETF RateLimit headers, 429 + Retry-After; %d requests per client, %d concurrent\n\n",
			cfg.Burst, cfg.Rate, cfg.N, cfg.Concurrency)
	case "envoy":
		fmt.Fprintf(w, "server: envoyproxy/ratelimit-style, fixed window of %d per %v in X-RateLimit-* (draft 03), bare 429; %d requests per client, %d concurrent\n\n",
			cfg.Rate*int64(cfg.Window/time.Second), cfg.Window, cfg.N, cfg.Concurrency)
	case "github":
		fmt.Fprintf(w, "server: GitHub-style, %d per %v window in X-RateLimit-*, 403 when spent; secondary limit above %d concurrent (403 + Retry-After); %d requests per client, %d concurrent\n\n",
			cfg.Rate*int64(cfg.Window/time.Second), cfg.Window, cfg.Concurrency/2, cfg.N, cfg.Concurrency)
	default:
		ra := "with Retry-After (whole seconds)"
		if cfg.Scenario == "bare" {
			ra = "bare 429, no Retry-After"
		}
		fmt.Fprintf(w, "server: token bucket %d/s, burst %d, %s; %d requests per client, %d concurrent\n\n",
			cfg.Rate, cfg.Burst, ra, cfg.N, cfg.Concurrency)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\trefused\tsent\tcompletion\tschedule\tfailed\trefused ÷ sluice\ttime ÷ sluice\t")
	s := rs[0]
	for _, r := range rs {
		sched := "-"
		if announces(cfg.Scenario) {
			sched = r.Schedule.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%s\t%d\t%s\t%.2f\t\n", r.Client, r.Code429, r.Sent,
			r.Elapsed.Round(10*time.Millisecond), sched, r.Failed, ratio(r.Code429, s.Code429),
			r.Elapsed.Seconds()/s.Elapsed.Seconds())
	}
	tw.Flush()
	switch err := Target(cfg, rs); {
	case err != nil:
		fmt.Fprintln(w, "\n"+err.Error())
	case announces(cfg.Scenario):
		fmt.Fprintln(w, "\ntarget met: sluice refused nothing, within 5% (+100 ms) of the schedule the announced limit allows, no further past it than the best peer that lost nothing, none lost")
	default:
		fmt.Fprintln(w, "\ntarget met: sluice ≤ 1/5 of the best peer's 429s, no slower, none lost")
	}
}

func ratio(a, b int64) string {
	if b == 0 {
		if a == 0 {
			return "1.0"
		}
		return fmt.Sprintf("%d ÷ 0", a)
	}
	return fmt.Sprintf("%.1f", float64(a)/float64(b))
}
