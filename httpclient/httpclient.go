package httpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/hostlimit"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/robots"
)

// Options configures a Transport. The zero value is the documented default
// (see the package documentation); each field says what its zero means.
type Options struct {
	// Transport sends each attempt. Nil means http.DefaultTransport.
	Transport http.RoundTripper

	// Rate is each host's rate in requests per second. Zero means
	// adaptive: AIMD per host, configured by Adaptive.
	Rate float64
	// Burst is the most requests a host's bucket starts at once. Zero
	// means 20 ms worth at the host's current rate, at least 1.
	Burst int
	// Concurrency is the most requests in flight per host. Zero means 4.
	// A host that answers as GitHub's API gets one at a time
	// (GitHubInFlight).
	Concurrency int
	// Adaptive configures the per-host AIMD controllers when Rate is zero.
	Adaptive adaptive.Options
	// AdaptiveConcurrency, when set, replaces Concurrency with an
	// adaptive limit per host (see hostlimit.Options.AdaptiveConcurrency):
	// e.g. func() adaptive.Limiter { return adaptive.NewGradient(adaptive.GradientOptions{}) }.
	AdaptiveConcurrency func() adaptive.Limiter
	// Ramp is how long a host takes to come back to full concurrency after
	// a pause. Zero means 5 s; negative disables it.
	Ramp time.Duration
	// Store holds the per-host token buckets. Nil means in process; a
	// redisstore shares each host's budget across a fleet.
	Store ratelimit.Store
	// HostKey names the host a request counts against. Nil means the
	// URL's host (with port), lowercased. RegistrableDomain pools the
	// hosts of a site.
	HostKey func(*http.Request) string

	// MaxAttempts is the most attempts per request, the first included.
	// Zero means 7; 1 disables retries.
	MaxAttempts int
	// Backoff computes the wait before each retry when the server gave no
	// Retry-After; it also paces the host pause after repeated 429s. Nil
	// means backoff.Recommended.
	Backoff backoff.Strategy
	// MaxDelay is the longest single wait. A Retry-After longer than it
	// fails the request at once with the delay in the error (matching
	// retry.ErrDelayTooLong). Zero means 60 s.
	MaxDelay time.Duration
	// Budget configures each host's retry budget.
	Budget retry.BudgetOptions
	// NoBudget turns the retry budget off.
	NoBudget bool
	// Breaker configures each host's circuit breaker.
	Breaker breaker.Options
	// NoBreaker turns the breaker off.
	NoBreaker bool
	// AttemptTimeout bounds each attempt up to the response headers (and
	// the body, which is read after RoundTrip returns). A timed-out attempt
	// is retried and slows the host down. Zero means no per-attempt bound
	// beyond the request's context.
	AttemptTimeout time.Duration

	// Classify reads a response or transport error as a signal. Nil means
	// Classify (this package's function).
	Classify func(*http.Response, error) adaptive.Signal
	// Observer receives an Event for every attempt, retry, wait, pause and
	// breaker transition. Nil means none. It is called synchronously from
	// the requests' goroutines: keep it fast and safe for concurrent use.
	Observer Observer
	// Logger receives debug records of retries and pauses. Nil means none.
	Logger *slog.Logger
	// Robots, when set, makes the Transport obey robots.txt: each origin's
	// file is fetched once through the Transport itself (paced and retried
	// like any request) and cached; a disallowed URL fails at once with an
	// error matching robots.ErrDisallowed, and a Crawl-delay caps the
	// host's rate. Its Fetch is set by New. Nil means robots.txt is not
	// read.
	Robots *robots.Options
	// IgnoreBudgetHeaders turns off reading the budget servers announce
	// (RateLimit, RateLimit-Policy, X-RateLimit-*; see ParseBudget). By
	// default each answer's budget holds its host (hostlimit's Announce):
	// what the server takes now is sent at once, the rest as it comes
	// back, never more than remains; and a spent budget's reset is the
	// delay of a 403 or 429 that gives no Retry-After.
	IgnoreBudgetHeaders bool
	// BudgetMode is how an announced budget is used: hostlimit.BudgetPace
	// (the zero value) or hostlimit.BudgetSpend, which differ for a token
	// bucket only (see hostlimit). Neither sends more than remains.
	BudgetMode hostlimit.BudgetMode
	// RandomDelay, when positive, makes each attempt wait a random time
	// in [0, RandomDelay) before it asks its host for a slot, spreading
	// requests (colly's RandomDelay, Scrapy's RANDOMIZE_DOWNLOAD_DELAY).
	RandomDelay time.Duration
	// MaxHosts bounds the hosts whose state (bucket, budget, breaker) is
	// kept; idle ones beyond it are forgotten. Zero means 10 000.
	MaxHosts int
	// Route names the requests that count against the same budget of a
	// server that keeps several (GitHub's X-RateLimit-Resource: core,
	// search, graphql; an IETF policy's name): a request waits for the
	// budget its route's answers last named (see hostlimit.AcquireRoute).
	// Nil means DefaultRoute: the method and the first segment of the
	// path.
	Route func(*http.Request) string
}

// DefaultRoute is the route of req when Options.Route is nil: its method
// and the first segment of its path ("GET /search" for
// /search/issues?q=x, "POST /graphql"), so that the routes a host keeps
// are few (hostlimit.MaxRoutes bounds them).
func DefaultRoute(req *http.Request) string {
	p := strings.TrimPrefix(req.URL.EscapedPath(), "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	return req.Method + " /" + p
}

// Transport is the polite http.RoundTripper. It is safe for concurrent use.
type Transport struct {
	o       Options
	base    http.RoundTripper
	limiter *hostlimit.Limiter
	robots  *robots.Cache

	mu    sync.Mutex
	hosts map[string]*hostState
}

type hostState struct {
	budget  *retry.Budget
	breaker *breaker.Breaker

	mu       sync.Mutex
	lastFail time.Time // when the latest failure counted by the breaker arrived
}

// countFailure reports whether a failure of an attempt sent at start counts
// towards the breaker: only one per window, since the concurrent requests
// that all saw the same 429 are one signal, not many in a row.
func (h *hostState) countFailure(start, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if start.Before(h.lastFail) {
		return false
	}
	h.lastFail = now
	return true
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport.
func New(o Options) *Transport {
	if o.Classify == nil {
		o.Classify = Classify
	}
	if o.MaxHosts <= 0 {
		o.MaxHosts = hostlimit.DefaultMaxHosts
	}
	if o.Backoff == nil {
		o.Backoff = backoff.Recommended()
	}
	if o.Route == nil {
		o.Route = DefaultRoute
	}
	t := &Transport{o: o, base: o.Transport, hosts: make(map[string]*hostState)}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	t.limiter = hostlimit.New(hostlimit.Options{
		Rate: o.Rate, Burst: o.Burst, Concurrency: o.Concurrency, Adaptive: o.Adaptive, AdaptiveConcurrency: o.AdaptiveConcurrency,
		Pause: o.Backoff, Ramp: o.Ramp, Store: o.Store, MaxHosts: o.MaxHosts, Logger: o.Logger, BudgetMode: o.BudgetMode,
		OnPause: func(host string, d time.Duration) {
			t.observe(Event{Kind: Pause, Host: host, Delay: d})
		},
	})
	if o.Robots != nil {
		ro := *o.Robots
		ro.Fetch = t.fetchRobots
		t.robots = robots.New(ro)
	}
	return t
}

type robotsFetch struct{}

// robotsFor carries, in the context of a robots.txt check, the request
// the check is for, so that the file is fetched as that request would be.
type robotsFor struct{}

// isRobotsFetch reports whether req is the Transport's own robots.txt
// fetch.
func isRobotsFetch(req *http.Request) bool { return req.Context().Value(robotsFetch{}) != nil }

// robotsDropped are the fields of a request that do not carry over to its
// origin's robots.txt: they describe its own body or its own operation.
var robotsDropped = []string{"Content-Type", "Content-Length", "Content-Encoding", "Idempotency-Key", "If-Match", "If-None-Match",
	"If-Modified-Since", "If-Unmodified-Since", "Range", "If-Range"}

// fetchRobots gets a robots.txt through t, marked so that RoundTrip does
// not consult robots.txt for it. It is asked as the request that needs it
// would be: of the same address, with the same header (credentials, a
// virtual Host), so that it is the file of the host the requests go to
// and counts against the caller's budget, not an anonymous one. The
// User-Agent is Robots.UserAgent when set.
func (t *Transport) fetchRobots(ctx context.Context, u string) (*http.Response, error) {
	var orig *http.Request
	if r, ok := ctx.Value(robotsFor{}).(*http.Request); ok {
		orig = r
		u = r.URL.Scheme + "://" + r.URL.Host + "/robots.txt"
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, robotsFetch{}, true), http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if orig != nil {
		req.Header = orig.Header.Clone()
		for _, k := range robotsDropped {
			req.Header.Del(k)
		}
		req.Host = orig.Host
	}
	if ua := t.o.Robots.UserAgent; ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	return (&http.Client{Transport: t}).Do(req)
}

// ErrDisallowed is robots.ErrDisallowed, for callers that use only this
// package.
var ErrDisallowed = robots.ErrDisallowed

// ErrRobotsUnreachable is matched by the error of a request whose
// origin's robots.txt could not be fetched for a network error (the host
// is down, refuses connections, times out): RFC 9309 says to fetch
// nothing then. It wraps the network error.
var ErrRobotsUnreachable = errors.New("httpclient: host unreachable (fetching robots.txt)")

// checkRobots applies robots.txt to req: an error for a disallowed URL, and
// the Crawl-delay as key's rate ceiling. The file is that of the host the
// request goes to: its Host field when set (a virtual host), else its
// URL's.
func (t *Transport) checkRobots(req *http.Request, key string) error {
	if t.robots == nil || isRobotsFetch(req) {
		return nil
	}
	u := req.URL
	if req.Host != "" && !strings.EqualFold(req.Host, u.Host) {
		v := *u
		v.Host = req.Host
		u = &v
	}
	d, err := t.robots.Check(context.WithValue(req.Context(), robotsFor{}, req), u)
	if err != nil {
		return err
	}
	if d.Err != nil {
		// Unreachable: RFC 9309 says to fetch nothing; say why.
		return fmt.Errorf("%w: %s: %w", ErrRobotsUnreachable, req.URL.Redacted(), d.Err)
	}
	if d.CrawlDelay > 0 {
		t.limiter.SetCeiling(key, 1/d.CrawlDelay.Seconds())
	}
	if !d.Allowed {
		// d.Reason is "disallowed by robots.txt" or "robots.txt
		// unreachable (503)": the sentinel names the first.
		if d.Reason == "disallowed by robots.txt" {
			return fmt.Errorf("httpclient: %s: %w", req.URL.Redacted(), robots.ErrDisallowed)
		}
		return fmt.Errorf("httpclient: %s: %w (%s)", req.URL.Redacted(), robots.ErrDisallowed, d.Reason)
	}
	return nil
}

func (t *Transport) maxDelay() time.Duration {
	if t.o.MaxDelay > 0 {
		return t.o.MaxDelay
	}
	return retry.DefaultMaxDelay
}

// NewClient returns an *http.Client whose Transport is New(o).
func NewClient(o Options) *http.Client {
	return &http.Client{Transport: New(o)}
}

// Hosts returns the per-host limiter state (rate, pauses, requests in
// flight), sorted by host.
func (t *Transport) Hosts() []hostlimit.HostState { return t.limiter.Hosts() }

func (t *Transport) host(key string) *hostState {
	t.mu.Lock()
	defer t.mu.Unlock()
	hs := t.hosts[key]
	if hs != nil {
		return hs
	}
	if len(t.hosts) >= t.o.MaxHosts {
		// Forget hosts whose state is the same as a new host's.
		now := time.Now()
		for k, h := range t.hosts {
			if h.budget.Full() && (h.breaker == nil || h.breaker.State(now) == breaker.Closed) {
				delete(t.hosts, k)
			}
		}
	}
	hs = &hostState{}
	if !t.o.NoBudget {
		hs.budget = retry.NewBudget(t.o.Budget)
	}
	if !t.o.NoBreaker {
		bo := t.o.Breaker
		if bo.Backoff == nil {
			bo.Backoff = t.o.Backoff
		}
		user := bo.OnStateChange
		bo.OnStateChange = func(from, to breaker.State, now time.Time) {
			if user != nil {
				user(from, to, now)
			}
			t.observe(Event{Kind: BreakerChange, Host: key, From: from, To: to})
		}
		hs.breaker = breaker.New(bo)
	}
	t.hosts[key] = hs
	return hs
}

// StatusError is the error of an attempt that got a retryable answer
// (429, 503, 5xx). When retries run out, the error RoundTrip returns wraps
// the last one.
type StatusError struct {
	StatusCode int
	Status     string        // e.g. "429 Too Many Requests"
	RetryAfter time.Duration // the answer's Retry-After, if any
	Header     http.Header   // the answer's header
	// Body is the start of the answer's body, at most MaxErrorBody
	// bytes (a problem+json, a rate limit's message), read before the
	// connection was reused; Truncated says there was more.
	Body      []byte
	Truncated bool
}

// MaxErrorBody is the most bytes of a refused answer's body a StatusError
// keeps.
const MaxErrorBody = 16 << 10

func (e *StatusError) Error() string {
	s := e.Status
	if s == "" {
		s = fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return "httpclient: " + s
}

// Replayable reports whether req may be sent more than once: its method is
// idempotent or it carries an Idempotency-Key, and its body is empty or
// can be rewound with GetBody.
func Replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		if req.Header.Get("Idempotency-Key") == "" {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func (t *Transport) hostKey(req *http.Request) string {
	if t.o.HostKey != nil {
		return t.o.HostKey(req)
	}
	return strings.ToLower(req.URL.Host)
}

// RoundTrip sends req politely, retrying it if it may be replayed. See the
// package documentation for the steps and what is returned.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("httpclient: nil request URL")
	}
	key := t.hostKey(req)
	if err := t.checkRobots(req, key); err != nil {
		closeBody(req)
		t.observe(Event{Kind: GiveUp, Host: key, Method: req.Method, Robots: isRobotsFetch(req), URL: req.URL.String(), Err: err})
		return nil, err
	}
	hs := t.host(key)
	maxAttempts := t.o.MaxAttempts
	replayable := Replayable(req)
	if !replayable {
		maxAttempts = 1
	}
	ctx := req.Context()
	var final *http.Response
	err := retry.Do(ctx, retry.Options{
		MaxAttempts: maxAttempts,
		Backoff:     t.o.Backoff,
		MaxDelay:    t.o.MaxDelay,
		Budget:      hs.budget,
		Logger:      t.o.Logger,
		OnRetry: func(e retry.Event) {
			t.observe(Event{Kind: Retry, Host: key, Method: req.Method, Robots: isRobotsFetch(req), URL: req.URL.String(),
				Attempt: e.Attempt, Delay: e.Delay, ServerDelay: e.ServerDelay, Err: e.Err})
		},
	}, func(ctx context.Context, attempt int) error {
		resp, err := t.attempt(ctx, req, key, hs, attempt, attempt == maxAttempts || !replayable)
		if err == nil {
			final = resp
		}
		return err
	})
	if final != nil {
		if err != nil { // cannot happen: a response means the attempt ended the loop
			closeResp(final)
			return nil, err
		}
		return final, nil
	}
	closeBody(req)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
	}
	t.observe(Event{Kind: GiveUp, Host: key, Method: req.Method, Robots: isRobotsFetch(req), URL: req.URL.String(), Err: err})
	return nil, err
}

// attempt sends one attempt. It returns the response to hand to the
// caller, or an error for retry.Do: retryable (with the server's delay) or
// Permanent. last means no retry follows, so a retryable answer is still
// turned into an error when replayable (the caller asked for retries) and
// returned as is when not.
func (t *Transport) attempt(ctx context.Context, req *http.Request, key string, hs *hostState, attempt int, last bool) (*http.Response, error) {
	r, err := attemptRequest(ctx, req, attempt)
	if err != nil {
		return nil, err
	}
	permit, probe, err := t.admit(ctx, req, key, hs, attempt)
	if err != nil {
		if attempt > 1 {
			closeBody(r)
		}
		return nil, err
	}
	var cancel context.CancelFunc
	if t.o.AttemptTimeout > 0 {
		var actx context.Context
		actx, cancel = context.WithTimeout(ctx, t.o.AttemptTimeout)
		r = r.WithContext(actx)
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	now := time.Now()
	latency := now.Sub(start)
	sig := t.o.Classify(resp, err)
	if err != nil && ctx.Err() != nil {
		sig = adaptive.Neutral // our own cancellation says nothing about the host
	}
	ra := t.serverDelay(resp, permit, sig, now, attempt)
	permit.Done(hostlimit.Feedback{Signal: sig, Latency: latency, RetryAfter: ra})
	if sig == adaptive.Throttled && ra == 0 {
		// No delay from the server: the host's pause after it is the
		// backoff schedule's step (Options.Backoff), and the retry waits
		// exactly that, not a second draw of the same schedule on top.
		ra = t.limiter.PauseLeft(key)
	}
	hs.record(probe, sig, start, now, ra)
	ev := Event{Kind: Attempt, Host: key, Method: req.Method, Robots: isRobotsFetch(req), URL: req.URL.String(), Attempt: attempt,
		Signal: sig, Latency: latency, Delay: ra, Err: err}
	if resp != nil {
		ev.Status = resp.StatusCode
	}
	t.observe(ev)

	if err != nil {
		if cancel != nil {
			cancel()
		}
		if ctx.Err() != nil {
			return nil, retry.Permanent(err)
		}
		return nil, err // a transport error: retried while attempts remain
	}
	retryable := sig == adaptive.Throttled || sig == adaptive.Overloaded
	if !retryable || (last && attempt == 1) {
		if cancel != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		}
		return resp, nil
	}
	se := &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, RetryAfter: ra, Header: resp.Header}
	se.Body, _ = io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody+1))
	if len(se.Body) > MaxErrorBody {
		se.Body, se.Truncated = se.Body[:MaxErrorBody], true
	}
	closeResp(resp)
	if cancel != nil {
		cancel()
	}
	return nil, retry.WithDelay(se, ra)
}

// attemptRequest is the request of attempt: req itself the first time,
// then a clone with the body rewound.
func attemptRequest(ctx context.Context, req *http.Request, attempt int) (*http.Request, error) {
	if attempt <= 1 {
		return req, nil
	}
	r := req.Clone(ctx)
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, retry.Permanent(fmt.Errorf("httpclient: rewind body: %w", err))
		}
		r.Body = body
	}
	return r, nil
}

// admit lets an attempt of req go to host key: past the host's breaker
// (probe: as its probe), its pause and its limiter, which it waits for.
// A refused attempt is an error for retry.Do.
func (t *Transport) admit(ctx context.Context, req *http.Request, key string, hs *hostState, attempt int) (permit *hostlimit.Permit, probe bool, err error) {
	if hs.breaker != nil {
		if probe, err = hs.breaker.Allow(time.Now()); err != nil {
			return nil, false, retry.Permanent(fmt.Errorf("httpclient: %s: %w", key, err))
		}
	}
	// Refused past the breaker: the attempt says nothing of the host.
	refuse := func(err error) (*hostlimit.Permit, bool, error) {
		if hs.breaker != nil {
			hs.breaker.Record(time.Now(), probe, breaker.Ignore, 0)
		}
		return nil, false, err
	}
	if left := t.limiter.PauseLeft(key); left > t.maxDelay() {
		// The host is paused (an earlier Retry-After) for longer than
		// this request may wait: fail now, with the delay, as the retry
		// loop does for a Retry-After of its own.
		return refuse(retry.WithDelay(fmt.Errorf("httpclient: %s paused for another %v", key, left.Round(time.Second)), left))
	}
	route := t.o.Route(req)
	if left := t.limiter.BudgetWait(key, route); left > t.maxDelay() {
		// The same for the budget that paces it: spent until a reset
		// further away than that.
		return refuse(retry.WithDelay(fmt.Errorf("httpclient: %s: the budget of %s is spent for another %v", key, route, left.Round(time.Second)), left))
	}
	waitStart := time.Now()
	if d := t.o.RandomDelay; d > 0 {
		if err := retry.Sleep(ctx, rand.N(d)); err != nil {
			return refuse(retry.Permanent(err))
		}
	}
	permit, err = t.limiter.AcquireRoute(ctx, key, route)
	if err != nil {
		return refuse(retry.Permanent(err))
	}
	if w := time.Since(waitStart); w > time.Millisecond {
		t.observe(Event{Kind: Wait, Host: key, Method: req.Method, Robots: isRobotsFetch(req), URL: req.URL.String(), Attempt: attempt, Delay: w})
	}
	return permit, probe, nil
}

// serverDelay is how long the answer resp, received at now and classified
// sig, asks the client to wait (Retry-After, else an exhausted budget's
// reset), and tells permit the budget it announces.
func (t *Transport) serverDelay(resp *http.Response, permit *hostlimit.Permit, sig adaptive.Signal, now time.Time, attempt int) time.Duration {
	if resp == nil {
		return 0
	}
	ra, ok := retry.RetryAfter(resp.Header, now)
	if !ok && sig == adaptive.Throttled && SecondaryLimit(resp) {
		// GitHub: "wait at least one minute before retrying", and
		// exponentially longer while it goes on.
		ra, ok = SecondaryDelay<<min(max(attempt-1, 0), 16), true
	}
	if !t.o.IgnoreBudgetHeaders {
		if b, has := ParseBudget(resp.Header, now); has {
			permit.Announce(hostlimit.Budget{Remaining: b.Remaining, Reset: b.Reset, Limit: b.Limit, Window: b.Window, Resource: b.Policy,
				MaxInFlight: gitHubInFlight(resp.Header)}, now)
			if !ok && b.Exhausted() && sig == adaptive.Throttled {
				ra = b.Reset // GitHub's 403/429 with X-RateLimit-Reset and no Retry-After
			}
		}
	}
	return ra
}

// GitHubInFlight is the most requests in flight to a host that answers as
// GitHub's API does (an X-GitHub-Request-Id or X-RateLimit-Resource
// field): its guide asks for requests one at a time, not at once, since
// its secondary limits refuse concurrent requests that no header
// announces, long before the budget it announces is spent.
const GitHubInFlight = 1

// gitHubInFlight is GitHubInFlight for an answer of GitHub's API, else 0.
func gitHubInFlight(h http.Header) int {
	if h.Get("X-Github-Request-Id") != "" || h.Get("X-Ratelimit-Resource") != "" {
		return GitHubInFlight
	}
	return 0
}

// SecondaryDelay is the least wait after a GitHub secondary rate limit
// that gives no Retry-After: GitHub asks for at least a minute, then
// exponentially longer while the limit goes on.
const SecondaryDelay = time.Minute

// SecondaryLimit reports whether resp is GitHub's secondary rate limit: a
// 403 or 429 whose body says "secondary rate limit". It may read up to
// 4 KiB of the body, which it puts back.
func SecondaryLimit(resp *http.Response) bool {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return false
	}
	return bytes.Contains(bytes.ToLower(peek(resp)), []byte("secondary rate limit"))
}

// record tells the host's breaker, if any, the outcome of an attempt sent
// at start and answered at now with signal sig and delay ra.
func (h *hostState) record(probe bool, sig adaptive.Signal, start, now time.Time, ra time.Duration) {
	if h.breaker == nil {
		return
	}
	outcome := breaker.Ignore
	switch {
	case sig == adaptive.Success:
		outcome = breaker.Success
	case sig.Congestion() && h.countFailure(start, now):
		outcome = breaker.Failure
	}
	h.breaker.Record(now, probe, outcome, ra)
}

// closeResp drains a little of the body, so the connection can be reused,
// and closes it.
func closeResp(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
