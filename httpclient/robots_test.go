package httpclient

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/robots"
)

// robotsSite serves a robots.txt and records when each page was asked for.
type robotsSite struct {
	robots string
	mu     sync.Mutex
	pages  []time.Time
	asked  int
}

func (s *robotsSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/robots.txt" {
		s.asked++
		if r.Header.Get("User-Agent") != "sluice-test/1.0" {
			w.WriteHeader(400)
			return
		}
		fmt.Fprint(w, s.robots)
		return
	}
	s.pages = append(s.pages, time.Now())
	w.WriteHeader(200)
}

// TestRobots: robots.txt is read once, disallowed URLs fail without being
// sent, and the Crawl-delay spaces the requests to the host.
func TestRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &robotsSite{robots: "User-agent: *\nDisallow: /private/\nCrawl-delay: 1\n\nUser-agent: sluice-test\nDisallow: /private/\nCrawl-delay: 2\n"}
		c := NewClient(Options{Transport: handlerTransport{s}, Rate: 100, Burst: 10, Concurrency: 4,
			Robots: &robots.Options{UserAgent: "sluice-test/1.0"}})
		var wg sync.WaitGroup
		var mu sync.Mutex
		disallowed := 0
		for i := range 10 {
			path := fmt.Sprintf("/page/%d", i)
			if i%3 == 0 {
				path = fmt.Sprintf("/private/%d", i)
			}
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://site.example"+path, nil)
				resp, err := c.Do(req)
				if err != nil {
					if !errors.Is(err, robots.ErrDisallowed) {
						t.Errorf("%s: %v", path, err)
					}
					mu.Lock()
					disallowed++
					mu.Unlock()
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		if disallowed != 4 || len(s.pages) != 6 || s.asked != 1 {
			t.Fatalf("%d disallowed, %d pages sent, robots.txt asked %d times; want 4, 6, 1", disallowed, len(s.pages), s.asked)
		}
		for i := 1; i < len(s.pages); i++ {
			if d := s.pages[i].Sub(s.pages[i-1]); d < 2*time.Second-time.Millisecond {
				t.Errorf("pages %d and %d %v apart, want the Crawl-delay of 2 s", i-1, i, d)
			}
		}
	})
}
