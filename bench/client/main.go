// Command client compares polite HTTP clients side by side, in one run,
// against the same throttling server: sluice's httpclient,
// hashicorp/go-retryablehttp and failsafe-go's failsafehttp retry policy.
//
//	cd bench && go run ./client                 # both scenarios, defaults below
//	cd bench && go run ./client -n 1000 -rate 200
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
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

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
	scenarios := flag.String("scenarios", "retry-after,bare", "comma-separated: retry-after, bare")
	flag.Parse()
	ok := true
	for _, sc := range strings.Split(*scenarios, ",") {
		c := cfg
		c.RetryAfter = sc == "retry-after"
		results := Compare(context.Background(), c)
		Print(os.Stdout, c, results)
		ok = ok && Target(results) == nil
		fmt.Println()
	}
	if !ok {
		os.Exit(1)
	}
}

// Config is one scenario.
type Config struct {
	N           int   // requests per client
	Rate, Burst int64 // the server's token bucket
	Concurrency int   // workers per client
	RetryAfter  bool  // the server sends Retry-After
}

func defaultConfig() Config {
	return Config{N: 600, Rate: 100, Burst: 10, Concurrency: 16, RetryAfter: true}
}

// Result is one client's run.
type Result struct {
	Client   string
	Sent     int64 // requests the server saw
	Code429  int64 // 429s the server sent
	Elapsed  time.Duration
	Failed   int // requests that did not end in a 200
	Requests int
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

func clients(cfg Config) []client {
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
	// as the peers have workers.
	sl := httpclient.NewClient(httpclient.Options{Transport: newTransport(), Concurrency: cfg.Concurrency})

	// go-retryablehttp: its default policy and backoff (which honours
	// Retry-After on 429/503), with the same caps.
	rh := retryablehttp.NewClient()
	rh.HTTPClient = &http.Client{Transport: newTransport()}
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
	fs := &http.Client{Transport: failsafehttp.NewRoundTripper(newTransport(), policy)}

	return []client{
		{"sluice", do(sl)},
		{"go-retryablehttp", rhGet},
		{"failsafe-go", do(fs)},
	}
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
func Compare(ctx context.Context, cfg Config) []Result {
	var out []Result
	for _, c := range clients(cfg) {
		out = append(out, run(ctx, cfg, c))
	}
	return out
}

func run(ctx context.Context, cfg Config, c client) Result {
	store := memstore.New(memstore.Options{SweepInterval: -1})
	defer store.Close()
	srv := &server{store: store, limit: ratelimit.Limit{Rate: cfg.Rate, Period: time.Second, Burst: cfg.Burst}, retryAfter: cfg.RetryAfter}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	jobs := make(chan int)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Concurrency {
		wg.Go(func() {
			for i := range jobs {
				code, err := c.get(ctx, fmt.Sprintf("%s/item/%d", hs.URL, i))
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
	return Result{
		Client: c.name, Sent: srv.sent.Load(), Code429: srv.n429.Load(),
		Elapsed: time.Since(start), Failed: int(failed.Load()), Requests: cfg.N,
	}
}

// Target checks sluice's result against the target: at most a
// fifth of the best peer's 429s, no slower than the fastest peer that
// lost nothing, none lost.
func Target(rs []Result) error {
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

// Print writes the results as a table with ratios to sluice.
func Print(w io.Writer, cfg Config, rs []Result) {
	ra := "with Retry-After (whole seconds)"
	if !cfg.RetryAfter {
		ra = "bare 429, no Retry-After"
	}
	fmt.Fprintf(w, "server: token bucket %d/s, burst %d, %s; %d requests per client, %d concurrent\n\n",
		cfg.Rate, cfg.Burst, ra, cfg.N, cfg.Concurrency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\t429s\tsent\tcompletion\tfailed\t429s ÷ sluice\ttime ÷ sluice\t")
	s := rs[0]
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%d\t%s\t%.2f\t\n", r.Client, r.Code429, r.Sent,
			r.Elapsed.Round(10*time.Millisecond), r.Failed, ratio(r.Code429, s.Code429),
			r.Elapsed.Seconds()/s.Elapsed.Seconds())
	}
	tw.Flush()
	if err := Target(rs); err != nil {
		fmt.Fprintln(w, "\n"+err.Error())
	} else {
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
