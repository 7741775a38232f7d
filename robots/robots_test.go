package robots

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// site serves robots.txt with a status and body it can change, counting
// fetches.
type site struct {
	mu      sync.Mutex
	status  int
	body    string
	fetches atomic.Int64
	delay   time.Duration
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	s.fetches.Add(1)
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.WriteHeader(s.status)
	w.Write([]byte(s.body))
}

func (s *site) set(status int, body string) {
	s.mu.Lock()
	s.status, s.body = status, body
	s.mu.Unlock()
}

func newCache(t *testing.T, ua string, now *time.Time) *Cache {
	return New(Options{
		UserAgent: ua,
		Fetch: func(ctx context.Context, u string) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return nil, err
			}
			return http.DefaultClient.Do(req)
		},
		Now: func() time.Time { return *now },
	})
}

func check(t *testing.T, c *Cache, raw string) Decision {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Check(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const file = `# example
User-agent: *
Disallow: /private/
Allow: /private/open
Crawl-delay: 2

User-agent: sluice
Disallow: /no-sluice
Allow: /no-sluice/but-this
Crawl-delay: 0.5

User-agent: otherbot
Disallow: /
`

func TestRules(t *testing.T) {
	s := &site{status: 200, body: file}
	hs := httptest.NewServer(s)
	defer hs.Close()
	now := time.Unix(1e9, 0)
	tests := []struct {
		ua, path string
		allowed  bool
		delay    time.Duration
	}{
		{"sluice/0.3 (+https://example.org/bot)", "/private/x", true, 500 * time.Millisecond}, // its own group only
		{"sluice/0.3", "/no-sluice/x", false, 500 * time.Millisecond},
		{"Sluice", "/no-sluice/but-this/y", true, 500 * time.Millisecond}, // case-insensitive agent, longest match
		{"curl/8", "/private/x", false, 2 * time.Second},
		{"curl/8", "/private/open?x=1", true, 2 * time.Second},
		{"curl/8", "/", true, 2 * time.Second},
		{"otherbot/1", "/anything", false, 0},
	}
	for _, tt := range tests {
		c := newCache(t, tt.ua, &now)
		d := check(t, c, hs.URL+tt.path)
		if d.Allowed != tt.allowed || d.CrawlDelay != tt.delay {
			t.Errorf("%s %s: %+v, want allowed %v, delay %v", tt.ua, tt.path, d, tt.allowed, tt.delay)
		}
	}
}

func TestStatuses(t *testing.T) {
	s := &site{}
	hs := httptest.NewServer(s)
	defer hs.Close()
	now := time.Unix(1e9, 0)
	for _, tt := range []struct {
		status  int
		allowed bool
	}{
		{404, true}, {401, true}, {403, true}, {410, true},
		{429, false}, {500, false}, {503, false},
	} {
		s.set(tt.status, "User-agent: *\nDisallow: /\n")
		c := newCache(t, "sluice", &now)
		if d := check(t, c, hs.URL+"/x"); d.Allowed != tt.allowed {
			t.Errorf("robots.txt %d: %+v, want allowed %v", tt.status, d, tt.allowed)
		}
	}
}

// TestCaching: one fetch per origin for TTL; an unreachable robots.txt
// is asked again after ErrorTTL, and the answer then replaces it.
func TestCaching(t *testing.T) {
	s := &site{status: 503}
	hs := httptest.NewServer(s)
	defer hs.Close()
	now := time.Unix(1e9, 0)
	c := newCache(t, "sluice", &now)
	if d := check(t, c, hs.URL+"/a"); d.Allowed {
		t.Fatalf("503: %+v, want disallowed", d)
	}
	check(t, c, hs.URL+"/b")
	if n := s.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches within ErrorTTL, want 1", n)
	}
	s.set(200, "User-agent: *\nDisallow: /b\n")
	now = now.Add(DefaultErrorTTL)
	if d := check(t, c, hs.URL+"/a"); !d.Allowed {
		t.Errorf("after ErrorTTL: %+v, want allowed", d)
	}
	if d := check(t, c, hs.URL+"/b"); d.Allowed {
		t.Errorf("after ErrorTTL: /b %+v, want disallowed", d)
	}
	s.set(200, "")
	now = now.Add(DefaultTTL - time.Second)
	if d := check(t, c, hs.URL+"/b"); d.Allowed || s.fetches.Load() != 2 {
		t.Errorf("within TTL: %+v after %d fetches, want the cached file (2 fetches)", d, s.fetches.Load())
	}
	now = now.Add(time.Second)
	if d := check(t, c, hs.URL+"/b"); !d.Allowed || s.fetches.Load() != 3 {
		t.Errorf("after TTL: %+v after %d fetches, want a new fetch allowing all", d, s.fetches.Load())
	}
}

// TestOneFetch: many concurrent checks of a new origin share one fetch.
func TestOneFetch(t *testing.T) {
	s := &site{status: 200, body: file, delay: 50 * time.Millisecond}
	hs := httptest.NewServer(s)
	defer hs.Close()
	now := time.Unix(1e9, 0)
	c := New(Options{Fetch: func(ctx context.Context, u string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		return http.DefaultClient.Do(req)
	}, Now: func() time.Time { return now }})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			u, _ := url.Parse(hs.URL + "/private/x")
			if _, err := c.Check(context.Background(), u); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := s.fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

// TestLenient: lines the parser refuses are skipped, the rest is kept.
func TestLenient(t *testing.T) {
	s := &site{status: 200, body: "Disallow: /before-any-agent\nUser-agent: *\nCrawl-delay: soon\nDisallow: /secret\n"}
	hs := httptest.NewServer(s)
	defer hs.Close()
	now := time.Unix(1e9, 0)
	c := newCache(t, "sluice", &now)
	if d := check(t, c, hs.URL+"/secret/x"); d.Allowed {
		t.Errorf("/secret: %+v, want disallowed", d)
	}
	if d := check(t, c, hs.URL+"/before-any-agent"); !d.Allowed {
		t.Errorf("/before-any-agent: %+v, want allowed", d)
	}
}

func TestBounds(t *testing.T) {
	now := time.Unix(1e9, 0)
	var fetched atomic.Int64
	c := New(Options{MaxOrigins: 10, Now: func() time.Time { return now },
		Fetch: func(ctx context.Context, u string) (*http.Response, error) {
			fetched.Add(1)
			return &http.Response{StatusCode: 404, Body: http.NoBody}, nil
		}})
	for i := range 1000 {
		u := &url.URL{Scheme: "http", Host: "h" + string(rune('a'+i%26)) + url.PathEscape(time.Duration(i).String()), Path: "/"}
		if _, err := c.Check(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.origins)
	c.mu.Unlock()
	if n > 10 {
		t.Errorf("%d origins kept, want at most 10", n)
	}
	if _, err := c.Check(t.Context(), &url.URL{Path: "/relative"}); err == nil {
		t.Error("relative URL: no error")
	}
	if d, _ := c.Check(t.Context(), &url.URL{Scheme: "https", Host: "x", Path: "/robots.txt"}); !d.Allowed {
		t.Error("robots.txt itself disallowed")
	}
}

func FuzzRobots(f *testing.F) {
	f.Add(file, "/private/x")
	f.Add("User-agent: *\nDisallow: /*.php$\nCrawl-delay: 1e9\n", "/a.php")
	f.Add("\x00\xff:\n:", "/")
	f.Fuzz(func(t *testing.T, body, path string) {
		now := time.Unix(1e9, 0)
		c := New(Options{Now: func() time.Time { return now },
			Fetch: func(ctx context.Context, u string) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, nil
			}})
		u := &url.URL{Scheme: "https", Host: "example.com", Path: path}
		if _, err := c.Check(t.Context(), u); err != nil {
			t.Fatalf("Check: %v", err)
		}
	})
}
