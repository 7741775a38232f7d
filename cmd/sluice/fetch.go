package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/hostlimit"
	"github.com/sluicehq/sluice/httpclient"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/robots"
	"github.com/sluicehq/sluice/storeurl"
	"golang.org/x/term"
)

const fetchUsage = `Usage: sluice fetch [flags] URL...
       sluice fetch [flags] -i FILE

Fetches URLs politely. Each host gets a token bucket (--rate, --burst) and a
cap on requests in flight (--concurrency); with no --rate the rate starts at
2 requests a second and AIMD finds what each host takes. A 429 or 503 pauses
the whole host for its Retry-After (or the backoff), then it ramps back up.
Retries use the backoff with jitter, at most --max-attempts attempts and
--max-delay per wait, from a retry budget per host; a host that keeps
throttling trips a breaker. A 403 or 429 that says when to come back
(Retry-After, X-RateLimit-Remaining: 0 with a reset, GitHub's secondary
limits) is waited out and retried; other 403s and challenge pages are not.
The budget servers announce (RateLimit, RateLimit-Policy, X-RateLimit-*) is
sent as soon as the server allows: what remains at once, then as it comes
back (a bucket's refill, a window's reset), never more than remains.
GitHub's API gets one request at a time, as its guide asks.
robots.txt is obeyed (--robots): each host's file is fetched once, with the
request's headers (-H) and for its Host, disallowed URLs fail without being
sent, and its Crawl-delay caps the host's rate. --store redis://... shares
each host's bucket with every sluice fetch using the same Redis.

Prints a progress bar with the rate and an ETA on a terminal (stderr) and a
summary at the end:
human-readable, or one JSON object with --json:
  {"requests","succeeded","failed","attempts","retries","status","hosts","elapsed_ms","robots"}

A refused connection (nothing listening) is retried at most twice, within
about a second, whatever --max-attempts says.

Exit status: 0 when every URL was fetched with a status below 400, 1 when
some failed, 2 for bad usage, 130 when interrupted (Ctrl-C).

Flags:
`

// fetchSummary is the --json output.
type fetchSummary struct {
	Requests  int                `json:"requests"`
	Succeeded int                `json:"succeeded"`
	Failed    int                `json:"failed"`
	Attempts  int64              `json:"attempts"`
	Retries   int64              `json:"retries"`
	Status    map[string]int64   `json:"status"`
	Hosts     map[string]float64 `json:"hosts"`
	ElapsedMS int64              `json:"elapsed_ms"`
	// Robots counts the robots.txt fetches apart from the URLs': their
	// attempts, answers, retries and the time they waited (for the host's
	// budget, pauses and retries). Absent with --robots=false.
	Robots *robotsSummary `json:"robots,omitempty"`
}

// robotsSummary is the robots.txt part of a fetchSummary.
type robotsSummary struct {
	Attempts int64            `json:"attempts"`
	Retries  int64            `json:"retries"`
	Status   map[string]int64 `json:"status"`
	WaitMS   int64            `json:"wait_ms"`
}

func runFetch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFetchFlags(args, stderr)
	if err != nil {
		return err
	}
	st := &fetchStats{status: map[int]int64{}}
	opts := cfg.clientOptions(st)
	if cfg.store != "" {
		store, err := storeurl.Open(ctx, cfg.store, storeurl.Options{})
		if err != nil {
			return fmt.Errorf("%w: --store: %w", errUsage, err)
		}
		defer store.Close()
		opts.Store = store
	}
	tr := httpclient.New(opts)
	start := time.Now()
	var done atomic.Int64
	stopBar := fetchProgress(stderr, cfg.progress && !cfg.json, len(cfg.urls), &done, st)
	ok, failures := cfg.fetchAll(ctx, &http.Client{Transport: tr}, &done)
	stopBar()
	sum := cfg.summary(st, tr, ok, time.Since(start))
	if cfg.json {
		if err := json.NewEncoder(stdout).Encode(sum); err != nil {
			return err
		}
	} else {
		fetchPrintSummary(stdout, sum, failures)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fetch interrupted: %d of %d URLs done", done.Load(), len(cfg.urls))
	}
	if sum.Failed > 0 {
		if cfg.json {
			for _, f := range failures {
				if f != "" {
					fmt.Fprintln(stderr, "sluice fetch:", f)
				}
			}
		}
		return fmt.Errorf("fetch: %d of %d URLs failed", sum.Failed, sum.Requests)
	}
	return nil
}

// fetchConfig is sluice fetch's command line, checked.
type fetchConfig struct {
	urls                          []*url.URL
	rate                          float64
	burst, conc, maxAttempts      int
	adapt, json, progress, domain bool
	robots                        bool
	budgetMode                    hostlimit.BudgetMode
	adaptConc                     string
	maxDelay, timeout             time.Duration
	backoff                       backoff.Strategy
	outDir                        string
	userAgent                     string
	header                        http.Header // -H, in order, User-Agent and Host included
	refusedDelay                  time.Duration
	store                         string        // --store: "" or memory, or a Redis URL
	randomDelay                   time.Duration // --random-delay
}

func parseFetchFlags(args []string, stderr io.Writer) (*fetchConfig, error) {
	fs := newFlagSet("fetch", "[flags] URL...", stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, fetchUsage)
		fs.PrintDefaults()
	}
	c := &fetchConfig{header: http.Header{}, refusedDelay: fetchRefusedDelay}
	text := c.define(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if c.urls, err = fetchURLs(fs.Args(), *text.input); err != nil {
		return nil, err
	}
	if err := c.checkBounds(*text.base); err != nil {
		return nil, err
	}
	if err := c.resolve(text); err != nil {
		return nil, err
	}
	c.backoff, err = fetchBackoff(*text.strategy, *text.base, c.maxDelay)
	return c, err
}

// fetchFlagText holds the flags that are parsed into fetchConfig once the
// command line has been read.
type fetchFlagText struct {
	input, strategy, adaptConc, budget *string
	base                               *time.Duration
}

// define declares sluice fetch's flags on fs, into c or, for those parsed
// afterwards, into the returned fetchFlagText.
func (c *fetchConfig) define(fs *flag.FlagSet) fetchFlagText {
	var text fetchFlagText
	text.input = fs.String("i", "", "read URLs from `FILE`, one per line (# comments; - for stdin)")
	fs.Float64Var(&c.rate, "rate", 0, "requests per second per host (0: adaptive, found by AIMD)")
	fs.IntVar(&c.burst, "burst", 0, "most requests a host's bucket starts at once (0: 20 ms worth at the current rate)")
	fs.IntVar(&c.conc, "concurrency", 4, "most requests in flight per host")
	fs.BoolVar(&c.adapt, "adaptive", false, "adapt each host's rate with AIMD (the default without --rate; with --rate, start there)")
	fs.IntVar(&c.maxAttempts, "max-attempts", 7, "most attempts per URL, the first included")
	fs.DurationVar(&c.maxDelay, "max-delay", 60*time.Second, "longest single wait; a longer Retry-After fails the URL at once")
	text.strategy = fs.String("backoff", "equal", "backoff: equal, full, decorrelated, exponential or multiplicative")
	text.base = fs.Duration("base-delay", 500*time.Millisecond, "backoff base delay")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "per-attempt timeout (0: none)")
	fs.StringVar(&c.outDir, "o", "", "save bodies under `DIR` (DIR/host/path); default: discard")
	fs.BoolVar(&c.json, "json", false, "print the summary as one JSON object")
	fs.BoolVar(&c.progress, "progress", true, "show a progress bar when stderr is a terminal")
	fs.Var(fetchHeaders{c.header}, "H", "add the request header `\"Name: value\"` to every request (repeatable; overrides -A and the defaults)")
	fs.Var(fetchHeaders{c.header}, "header", "same as -H")
	fs.StringVar(&c.userAgent, "A", fetchUserAgent(), "the User-Agent `string`")
	fs.StringVar(&c.userAgent, "user-agent", fetchUserAgent(), "same as -A")
	text.adaptConc = fs.String("adaptive-concurrency", "off", "make each host's cap on requests in flight adaptive, following the latency of its answers: off (--concurrency, fixed), gradient or vegas (at most --concurrency)")
	text.budget = fs.String("budget", "pace", "what to do with the budget a server announces (RateLimit, X-RateLimit-*): pace (send what it takes now, then as it comes back: a bucket's refill, a window's reset) or spend (the same, but a bucket is sent whole once full again); neither sends more than remains")
	fs.BoolVar(&c.robots, "robots", true, "obey robots.txt for the -A user agent (--robots=false to ignore it)")
	fs.StringVar(&c.store, "store", "", "where each host's bucket lives: memory (the default, this process only) or a Redis `URL` (redis://host:6379/0, as sluice serve's store), shared by every sluice fetch using it so that a fleet stays within one host's rate together")
	fs.DurationVar(&c.randomDelay, "random-delay", 0, "wait a random time up to `D` before each request, spreading requests (0: none)")
	fs.BoolVar(&c.domain, "by-domain", false, "limit per registrable domain (www.example.com and img.example.com together) instead of per host")
	return text
}

// fetchURLs are the URLs given as arguments, then those of the file
// input (none if empty), checked.
func fetchURLs(args []string, input string) ([]*url.URL, error) {
	urls := args
	if input != "" {
		more, err := fetchReadURLs(input)
		if err != nil {
			return nil, err
		}
		urls = append(urls, more...)
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: no URLs (give them as arguments or with -i FILE)", errUsage)
	}
	out := make([]*url.URL, len(urls))
	for i, s := range urls {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: not an http(s) URL: %q (give the scheme: http://%s)", errUsage, s, strings.TrimPrefix(s, "//"))
		}
		out[i] = u
	}
	return out, nil
}

// checkBounds refuses the numeric flags out of their range; base is
// --base-delay.
func (c *fetchConfig) checkBounds(base time.Duration) error {
	switch {
	case c.rate < 0 || c.rate != c.rate:
		return fmt.Errorf("%w: --rate %v: want 0 (adaptive) or more", errUsage, c.rate)
	case c.burst < 0:
		return fmt.Errorf("%w: --burst %d is negative", errUsage, c.burst)
	case c.conc < 1:
		return fmt.Errorf("%w: --concurrency %d: want at least 1", errUsage, c.conc)
	case c.maxAttempts < 1:
		return fmt.Errorf("%w: --max-attempts %d: want at least 1", errUsage, c.maxAttempts)
	case c.maxDelay <= 0:
		return fmt.Errorf("%w: --max-delay %v: want a positive duration", errUsage, c.maxDelay)
	case base <= 0:
		return fmt.Errorf("%w: --base-delay %v: want a positive duration", errUsage, base)
	case c.timeout < 0:
		return fmt.Errorf("%w: --timeout %v is negative (0: none)", errUsage, c.timeout)
	case c.randomDelay < 0:
		return fmt.Errorf("%w: --random-delay %v is negative (0: none)", errUsage, c.randomDelay)
	}
	return nil
}

// resolve parses --adaptive-concurrency and --budget into c.
func (c *fetchConfig) resolve(text fetchFlagText) error {
	switch *text.adaptConc {
	case "off", "gradient", "vegas":
		c.adaptConc = *text.adaptConc
	default:
		return fmt.Errorf("%w: --adaptive-concurrency %q: want off, gradient or vegas", errUsage, *text.adaptConc)
	}
	switch *text.budget {
	case "pace":
		c.budgetMode = hostlimit.BudgetPace
	case "spend":
		c.budgetMode = hostlimit.BudgetSpend
	default:
		return fmt.Errorf("%w: --budget %q: want pace or spend", errUsage, *text.budget)
	}
	return nil
}

func (c *fetchConfig) clientOptions(st *fetchStats) httpclient.Options {
	opts := httpclient.Options{
		Burst:          c.burst,
		Concurrency:    c.conc,
		MaxAttempts:    c.maxAttempts,
		MaxDelay:       c.maxDelay,
		Backoff:        c.backoff,
		AttemptTimeout: c.timeout,
		Observer:       httpclient.ObserverFunc(st.observe),
		RandomDelay:    c.randomDelay,
		Transport:      refusedTransport{base: http.DefaultTransport, retries: fetchRefusedRetries, delay: c.refusedDelay},
	}
	if c.domain {
		opts.HostKey = httpclient.RegistrableDomain
	}
	if c.robots {
		opts.Robots = &robots.Options{UserAgent: c.userAgent}
	}
	opts.BudgetMode = c.budgetMode
	lo := adaptive.LimiterOptions{Initial: min(c.conc, 20), Max: c.conc}
	switch c.adaptConc {
	case "gradient":
		opts.AdaptiveConcurrency = func() adaptive.Limiter { return adaptive.NewGradient(adaptive.GradientOptions{LimiterOptions: lo}) }
	case "vegas":
		opts.AdaptiveConcurrency = func() adaptive.Limiter { return adaptive.NewVegas(adaptive.VegasOptions{LimiterOptions: lo}) }
	}
	if c.rate > 0 {
		if c.adapt {
			opts.Adaptive = adaptive.Options{Initial: c.rate, NoSlowStart: true}
		} else {
			opts.Rate = c.rate
		}
	}
	return opts
}

// hostKey is the pool a URL is limited in: its host, or with --by-domain
// its registrable domain.
func (c *fetchConfig) hostKey(u *url.URL) string {
	if c.domain {
		return httpclient.RegistrableDomain(&http.Request{URL: u})
	}
	return strings.ToLower(u.Host)
}

// fetchAll fetches every URL, with one queue per host each drained by
// --concurrency workers, so that a paused host never holds up the others.
// It returns how many succeeded and, per URL, its failure ("" if none).
func (c *fetchConfig) fetchAll(ctx context.Context, client *http.Client, done *atomic.Int64) (int, []string) {
	byHost := map[string][]int{}
	var hosts []string
	for i, u := range c.urls {
		h := c.hostKey(u)
		if _, ok := byHost[h]; !ok {
			hosts = append(hosts, h)
		}
		byHost[h] = append(byHost[h], i)
	}
	var okCount atomic.Int64
	failures := make([]string, len(c.urls))
	var wg sync.WaitGroup
	for _, h := range hosts {
		queue := make(chan int)
		for range min(c.conc, len(byHost[h])) {
			wg.Go(func() {
				for i := range queue {
					if err := c.fetchOne(ctx, client, c.urls[i]); err != nil {
						failures[i] = fmt.Sprintf("%s: %v", c.urls[i], err)
					} else {
						okCount.Add(1)
					}
					done.Add(1)
				}
			})
		}
		wg.Go(func() {
			defer close(queue)
			for _, i := range byHost[h] {
				select {
				case queue <- i:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	return int(okCount.Load()), failures
}

func (c *fetchConfig) summary(st *fetchStats, tr *httpclient.Transport, ok int, elapsed time.Duration) fetchSummary {
	sum := fetchSummary{
		Requests:  len(c.urls),
		Succeeded: ok,
		Attempts:  st.attempts.Load(),
		Retries:   st.retries.Load(),
		Status:    map[string]int64{},
		Hosts:     map[string]float64{},
		ElapsedMS: elapsed.Milliseconds(),
	}
	sum.Failed = sum.Requests - sum.Succeeded
	st.mu.Lock()
	for code, n := range st.status {
		sum.Status[strconv.Itoa(code)] = n
	}
	st.mu.Unlock()
	for _, h := range tr.Hosts() {
		sum.Hosts[h.Host] = float64(int64(h.Rate*100+0.5)) / 100
	}
	if c.robots {
		sum.Robots = st.robots.summary()
	}
	return sum
}

func (c *fetchConfig) fetchOne(ctx context.Context, client *http.Client, u *url.URL) error {
	dir := c.outDir
	// Counts this URL's refused connections across its attempts.
	ctx = context.WithValue(ctx, refusedKey{}, new(atomic.Int32))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	} else {
		req.Header["User-Agent"] = []string{""} // none, not Go's
	}
	for k, v := range c.header {
		if k == "Host" {
			req.Host = v[len(v)-1]
			continue
		}
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	w := io.Discard
	if dir != "" && resp.StatusCode < 400 {
		name := fetchPath(dir, u)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	if resp.StatusCode >= 400 {
		return errors.New(resp.Status)
	}
	return nil
}

// fetchPath maps u to a file under dir: dir/host/path, with index.html for
// a directory and the query folded into the name. Nothing can escape dir.
func fetchPath(dir string, u *url.URL) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r == '/' || r == '\\' || r == ':' || r < ' ':
				return '_'
			}
			return r
		}, s)
	}
	p := u.EscapedPath()
	if p == "" || strings.HasSuffix(p, "/") {
		p += "index.html"
	}
	var parts []string
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			continue
		}
		parts = append(parts, clean(seg))
	}
	if u.RawQuery != "" && len(parts) > 0 {
		parts[len(parts)-1] += "_" + clean(u.RawQuery)
	}
	return filepath.Join(append([]string{dir, clean(u.Host)}, parts...)...)
}

func fetchReadURLs(name string) ([]string, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var urls []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		urls = append(urls, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return urls, nil
}

func fetchBackoff(name string, base, maxd time.Duration) (backoff.Strategy, error) {
	switch name {
	case "equal":
		return backoff.EqualJitter{Base: base, Max: maxd}, nil
	case "full":
		return backoff.FullJitter{Base: base, Max: maxd}, nil
	case "decorrelated":
		return backoff.Decorrelated{Base: base, Max: maxd}, nil
	case "exponential":
		return backoff.Exponential{Base: base, Max: maxd}, nil
	case "multiplicative":
		return backoff.Multiplicative{Base: base, Max: maxd}, nil
	}
	return nil, fmt.Errorf("%w: unknown --backoff %q (want equal, full, decorrelated, exponential or multiplicative)", errUsage, name)
}

// fetchStats counts what the transport reports: the URLs' attempts, and
// apart, robots.txt's.
type fetchStats struct {
	attempts, retries, throttled atomic.Int64
	mu                           sync.Mutex
	status                       map[int]int64

	robots robotsStats
}

// robotsStats counts the robots.txt fetches.
type robotsStats struct {
	mu                sync.Mutex
	attempts, retries int64
	status            map[int]int64
	wait              time.Duration
}

func (r *robotsStats) observe(e httpclient.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case httpclient.Attempt:
		r.attempts++
		if e.Status != 0 {
			if r.status == nil {
				r.status = map[int]int64{}
			}
			r.status[e.Status]++
		}
	case httpclient.Retry:
		r.retries++
		r.wait += e.Delay
	case httpclient.Wait:
		r.wait += e.Delay
	}
}

func (r *robotsStats) summary() *robotsSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &robotsSummary{Attempts: r.attempts, Retries: r.retries, Status: map[string]int64{}, WaitMS: r.wait.Milliseconds()}
	for code, n := range r.status {
		out.Status[strconv.Itoa(code)] = n
	}
	return out
}

func (s *fetchStats) observe(e httpclient.Event) {
	if e.Robots {
		s.robots.observe(e) // apart: the URLs' counts are the URLs'
		return
	}
	switch e.Kind {
	case httpclient.Attempt:
		s.attempts.Add(1)
		if e.Status != 0 {
			s.mu.Lock()
			s.status[e.Status]++
			s.mu.Unlock()
		}
		if e.Signal == adaptive.Throttled {
			s.throttled.Add(1)
		}
	case httpclient.Retry:
		s.retries.Add(1)
	}
}

// fetchProgress draws a progress bar on stderr while URLs are fetched, if
// stderr is a terminal. The returned func stops and erases it.
func fetchProgress(w io.Writer, enabled bool, total int, done *atomic.Int64, st *fetchStats) func() {
	f, ok := w.(*os.File)
	// A terminal, exactly: /dev/null is a character device too.
	if !enabled || !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	rate := newProgressRate(time.Now())
	draw := func() {
		n := int(done.Load())
		fmt.Fprint(f, "\r"+progressLine(n, total, st.retries.Load(), st.throttled.Load(), rate.update(time.Now(), n))+"\033[K")
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				draw()
			case <-stop:
				fmt.Fprint(f, "\r\033[K")
				return
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// progressRate is the completion rate over the last few seconds,
// smoothed, for the progress line's rate and ETA.
type progressRate struct {
	last  time.Time
	lastN int
	rate  float64 // URLs per second; <0 until the first measure
}

func newProgressRate(now time.Time) *progressRate { return &progressRate{last: now, rate: -1} }

// update takes the count done at now and returns the smoothed rate.
func (r *progressRate) update(now time.Time, n int) float64 {
	dt := now.Sub(r.last).Seconds()
	if dt < 0.5 {
		return r.rate
	}
	inst := float64(n-r.lastN) / dt
	if r.rate < 0 {
		r.rate = inst
	} else {
		r.rate = 0.7*r.rate + 0.3*inst // about the last 3 s at 0.5 s steps
	}
	r.last, r.lastN = now, n
	return r.rate
}

// progressLine is the progress bar's text: done of total, the rate and
// the time left at that rate.
func progressLine(n, total int, retries, throttled int64, rate float64) string {
	const width = 30
	filled := width * min(n, total) / max(total, 1)
	eta := "ETA --"
	switch {
	case n >= total:
		eta = "ETA 0s"
	case rate > 0:
		left := time.Duration(float64(total-n) / rate * float64(time.Second))
		eta = "ETA " + left.Round(time.Second).String()
	}
	rs := "-- URL/s"
	if rate >= 0 {
		rs = fmt.Sprintf("%.1f URL/s", rate)
	}
	return fmt.Sprintf("[%s%s] %d/%d  %s  %s  retries %d  429/503 %d",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, total, rs, eta, retries, throttled)
}

// statusLine is "status 200×3 429×1", or says no answer came.
func statusLine(m map[string]int64) string {
	codes := make([]string, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s×%d", c, m[c]))
	}
	if len(parts) == 0 {
		return "no status: no response came back"
	}
	return "status " + strings.Join(parts, " ")
}

func fetchPrintSummary(w io.Writer, s fetchSummary, failures []string) {
	fmt.Fprintf(w, "fetched %d %s in %v: %d succeeded, %d failed\n",
		s.Requests, plural(s.Requests, "URL"), (time.Duration(s.ElapsedMS) * time.Millisecond).Round(10*time.Millisecond), s.Succeeded, s.Failed)
	status := statusLine(s.Status)
	fmt.Fprintf(w, "attempts %d (%d %s); %s\n", s.Attempts, s.Retries, map[bool]string{true: "retry", false: "retries"}[s.Retries == 1], status)
	if r := s.Robots; r != nil && r.Attempts > 0 {
		fmt.Fprintf(w, "robots.txt: attempts %d (%d %s); %s; waited %v\n", r.Attempts, r.Retries,
			map[bool]string{true: "retry", false: "retries"}[r.Retries == 1], statusLine(r.Status), (time.Duration(r.WaitMS) * time.Millisecond).Round(10*time.Millisecond))
	}
	hosts := make([]string, 0, len(s.Hosts))
	for h := range s.Hosts {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		fmt.Fprintf(w, "host %s: %.2f req/s\n", h, s.Hosts[h])
	}
	n := 0
	for _, f := range failures {
		if f == "" {
			continue
		}
		if n == 10 {
			fmt.Fprintf(w, "… and %d more failures\n", s.Failed-10)
			break
		}
		fmt.Fprintln(w, "failed:", f)
		n++
	}
}

// fetchHeaders is -H "Name: value", repeatable.
type fetchHeaders struct{ h http.Header }

func (f fetchHeaders) String() string { return "" }

func (f fetchHeaders) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("%q: want \"Name: value\"", v)
	}
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) {
		return fmt.Errorf("%q: %q is not a header name", v, name)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("%q: a header value cannot hold CR, LF or NUL", v)
	}
	f.h.Add(name, value)
	return nil
}

// fetchUserAgent is sluice fetch's default User-Agent: sluice-fetch/VERSION.
func fetchUserAgent() string {
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return "sluice-fetch/" + v
}

// A refused connection means nothing listens there: retrying it for long
// (7 attempts, backoff to --max-delay) only delays the answer. It is
// retried fetchRefusedRetries times, after fetchRefusedDelay then twice
// that.
const fetchRefusedRetries = 2

var fetchRefusedDelay = 250 * time.Millisecond

// refusedKey keys a URL's count of refused connections in its context.
type refusedKey struct{}

// refusedTransport bounds the retries of refused connections: the retry
// loop (package retry, run by httpclient) stops on a Permanent error and
// waits a WithDelay error's delay instead of the backoff.
type refusedTransport struct {
	base    http.RoundTripper
	retries int
	delay   time.Duration
}

func (t refusedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return resp, err
	}
	n, ok := r.Context().Value(refusedKey{}).(*atomic.Int32)
	if !ok {
		return resp, err
	}
	k := int(n.Add(1))
	if k > t.retries {
		return nil, retry.Permanent(err)
	}
	return nil, retry.WithDelay(err, t.delay<<(k-1))
}
