package robots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"
)

// Defaults of the zero Options.
const (
	DefaultUserAgent  = "sluice"
	DefaultTTL        = 24 * time.Hour
	DefaultErrorTTL   = time.Minute
	DefaultMaxSize    = 500 << 10
	DefaultMaxOrigins = 10000
)

// ErrDisallowed is matched by the error of a request that robots.txt
// disallows (or that an unreachable robots.txt holds back).
var ErrDisallowed = errors.New("disallowed by robots.txt")

// Options configures a Cache.
type Options struct {
	// UserAgent is the agent whose group of rules applies: its product
	// token (the part before any '/' or space, case-insensitive) is
	// matched. Empty means DefaultUserAgent.
	UserAgent string
	// Fetch gets a robots.txt URL. It must be set. Package httpclient
	// passes its own polite transport, so that the fetch is paced and
	// retried like any request.
	Fetch func(ctx context.Context, robotsURL string) (*http.Response, error)
	// TTL is how long a fetched file is used. Zero means DefaultTTL (24 h).
	TTL time.Duration
	// ErrorTTL is how long an unreachable robots.txt (429, 5xx, network
	// error) holds its origin back before it is asked again. Zero means
	// DefaultErrorTTL (1 min).
	ErrorTTL time.Duration
	// MaxSize is the most bytes of a file read. Zero means DefaultMaxSize.
	MaxSize int64
	// MaxOrigins bounds the origins remembered. Zero means
	// DefaultMaxOrigins.
	MaxOrigins int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Decision is what robots.txt says of one URL.
type Decision struct {
	// Allowed reports whether the URL may be fetched.
	Allowed bool
	// CrawlDelay is the group's Crawl-delay: the least time between two
	// requests to the origin. Zero if none.
	CrawlDelay time.Duration
	// Reason says why, for messages: "allowed", "disallowed by
	// robots.txt", "no robots.txt (404)", "robots.txt unreachable (503)".
	Reason string
	// Err is the fetch's error when robots.txt was unreachable because of
	// it (a refused connection, a timeout).
	Err error
}

// Cache holds the robots.txt of each origin. It is safe for concurrent
// use.
type Cache struct {
	o     Options
	agent string

	mu      sync.Mutex
	origins map[string]*entry
}

type entry struct {
	ready   chan struct{} // closed when the fetch is done
	data    *robotstxt.RobotsData
	group   *robotstxt.Group
	status  int   // HTTP status of the fetch, 0 on a network error
	err     error // the fetch's error, if unreachable
	expires time.Time
}

// New returns a Cache.
func New(o Options) *Cache {
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.ErrorTTL <= 0 {
		o.ErrorTTL = DefaultErrorTTL
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.MaxOrigins <= 0 {
		o.MaxOrigins = DefaultMaxOrigins
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cache{o: o, agent: ProductToken(o.UserAgent), origins: make(map[string]*entry)}
}

// ProductToken returns the part of a User-Agent that robots.txt groups
// name: "sluice/0.3 (+https://x)" gives "sluice".
func ProductToken(ua string) string {
	ua = strings.TrimSpace(ua)
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	return strings.ToLower(ua)
}

// IsRobotsURL reports whether u is an origin's robots.txt, which is never
// itself subject to robots.txt.
func IsRobotsURL(u *url.URL) bool { return u.Path == "/robots.txt" }

// Check returns what robots.txt says of u, fetching it first if the Cache
// has no fresh copy. Only a canceled ctx or a URL that is not absolute
// http(s) is an error; an unreachable robots.txt is a Decision that
// disallows.
func (c *Cache) Check(ctx context.Context, u *url.URL) (Decision, error) {
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return Decision{}, fmt.Errorf("robots: not an absolute http(s) URL: %q", u.Redacted())
	}
	if IsRobotsURL(u) {
		return Decision{Allowed: true, Reason: "robots.txt itself"}, nil
	}
	origin := strings.ToLower(u.Scheme + "://" + u.Host)
	e, err := c.entry(ctx, origin)
	if err != nil {
		return Decision{}, err
	}
	switch {
	case e.err != nil || e.status == http.StatusTooManyRequests || e.status >= 500:
		what := "network error"
		if e.err == nil {
			what = fmt.Sprint(e.status)
		}
		return Decision{Reason: "robots.txt unreachable (" + what + ")", Err: e.err}, nil
	case e.status >= 400:
		return Decision{Allowed: true, Reason: fmt.Sprintf("no robots.txt (%d)", e.status)}, nil
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	d := Decision{Allowed: e.group.Test(path), CrawlDelay: e.group.CrawlDelay, Reason: "allowed"}
	if !d.Allowed {
		d.Reason = "disallowed by robots.txt"
	}
	return d, nil
}

// entry returns origin's fresh entry, fetching it if needed; concurrent
// callers share one fetch.
func (c *Cache) entry(ctx context.Context, origin string) (*entry, error) {
	for {
		now := c.o.Now()
		c.mu.Lock()
		e := c.origins[origin]
		if e != nil {
			select {
			case <-e.ready:
				if now.Before(e.expires) {
					c.mu.Unlock()
					return e, nil
				}
				e = nil // stale: fetch again
			default:
			}
		}
		if e == nil {
			if len(c.origins) >= c.o.MaxOrigins {
				c.evict(now)
			}
			e = &entry{ready: make(chan struct{})}
			c.origins[origin] = e
			c.mu.Unlock()
			c.fetch(ctx, origin, e)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return e, nil
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// evict drops expired entries, and if none was, the one expiring first.
// c.mu is held.
func (c *Cache) evict(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for k, e := range c.origins {
		select {
		case <-e.ready:
		default:
			continue // being fetched
		}
		if !now.Before(e.expires) {
			delete(c.origins, k)
			continue
		}
		if oldest == "" || e.expires.Before(oldestAt) {
			oldest, oldestAt = k, e.expires
		}
	}
	if len(c.origins) >= c.o.MaxOrigins && oldest != "" {
		delete(c.origins, oldest)
	}
}

func (c *Cache) fetch(ctx context.Context, origin string, e *entry) {
	defer close(e.ready)
	resp, err := c.o.Fetch(ctx, origin+"/robots.txt")
	now := c.o.Now()
	if err != nil {
		e.err, e.expires = err, now.Add(c.o.ErrorTTL)
		if ctx.Err() != nil {
			// Our own cancellation says nothing of the origin.
			c.mu.Lock()
			if c.origins[origin] == e {
				delete(c.origins, origin)
			}
			c.mu.Unlock()
		}
		return
	}
	defer resp.Body.Close()
	e.status = resp.StatusCode
	switch {
	case e.status == http.StatusTooManyRequests || e.status >= 500 || e.status < 200:
		e.expires = now.Add(c.o.ErrorTTL) // unreachable: ask again soon
		return
	case e.status >= 300:
		// A 3xx left here is a redirect the client would not follow (too
		// many): RFC 9309 lets that count as no robots.txt, like a 4xx.
		if e.status < 400 {
			e.status = http.StatusNotFound
		}
		e.expires = now.Add(c.o.TTL)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxSize))
	if err != nil {
		e.err, e.status, e.expires = err, 0, now.Add(c.o.ErrorTTL)
		return
	}
	data, err := robotstxt.FromBytes(body)
	if err != nil {
		// The parser refuses a whole file for a rule before any
		// User-agent or a Crawl-delay that is not a number; crawlers
		// (Google's among them) skip such lines and keep the rest.
		data, err = robotstxt.FromBytes(lenient(body))
	}
	if err != nil {
		e.err, e.status, e.expires = err, 0, now.Add(c.o.ErrorTTL)
		return
	}
	e.data, e.group = data, data.FindGroup(c.agent)
	e.expires = now.Add(c.o.TTL)
}

// lenient drops the lines robotstxt refuses: rules before the first
// User-agent, and Crawl-delays that are not numbers.
func lenient(body []byte) []byte {
	var out strings.Builder
	seenAgent := false
	for line := range strings.Lines(string(body)) {
		content, _, _ := strings.Cut(line, "#")
		k, v, ok := strings.Cut(content, ":")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if ok {
			switch k {
			case "user-agent":
				seenAgent = true
			case "allow", "disallow":
				if !seenAgent {
					continue
				}
			case "crawl-delay":
				if _, err := strconv.ParseFloat(v, 64); err != nil || !seenAgent {
					continue
				}
			}
		}
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteByte('\n')
		}
	}
	return []byte(out.String())
}
