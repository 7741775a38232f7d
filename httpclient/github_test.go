package httpclient

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/retry"
)

// secondaryServer answers as GitHub's API does, with a budget far from
// spent (X-RateLimit-*, and X-RateLimit-Resource: core unless
// unnamed, X-GitHub-Request-Id then) and a secondary limit that nothing
// announces: more than maxAt requests at once are refused with 403,
// Retry-After and GitHub's message.
type secondaryServer struct {
	maxAt   int
	unnamed bool

	mu          sync.Mutex
	at, most    int
	ok, refused int
}

func (s *secondaryServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.at++
	s.most = max(s.most, s.at)
	over := s.at > s.maxAt
	used := s.ok + 1
	s.mu.Unlock()
	// Some work, so that requests at once overlap; the assertions count.
	time.Sleep(3 * time.Millisecond)
	s.mu.Lock()
	s.at--
	if over {
		s.refused++
	} else {
		s.ok++
	}
	s.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(5000-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	if s.unnamed {
		h.Set("X-GitHub-Request-Id", "CAFE:1:2:3:4")
	} else {
		h.Set("X-RateLimit-Resource", "core")
	}
	if over {
		h.Set("Retry-After", "1")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
	}
}

// TestGitHubOneAtATime: a host that answers as GitHub's API gets its
// requests one at a time, as GitHub's guide asks, whatever the
// Concurrency: its secondary limit on requests at once, which no header
// announces, refuses none, though the budget it announces would take
// them all at once (before, the first answer let 8 go together, and all
// but 2 were refused).
func TestGitHubOneAtATime(t *testing.T) {
	t.Parallel()
	// Named, the first answer moves the route to the core budget; unnamed,
	// the requests that took their slots before it are held back too.
	for _, unnamed := range []bool{false, true} {
		srv := &secondaryServer{maxAt: 2, unnamed: unnamed}
		hs := httptest.NewServer(srv)
		c := NewClient(Options{Concurrency: 8})
		failed := fetchAll(t, c, hs.URL, 40)
		hs.Close()
		srv.mu.Lock()
		if failed != 0 || srv.refused != 0 || srv.ok != 40 {
			t.Errorf("unnamed %v: %d failed, %d refused, %d answered; want 0, 0, 40", unnamed, failed, srv.refused, srv.ok)
		}
		if srv.most != 1 {
			t.Errorf("unnamed %v: %d requests at once, want 1", unnamed, srv.most)
		}
		srv.mu.Unlock()
		if hs := c.Transport.(*Transport).Hosts(); len(hs) != 1 || hs[0].MaxInFlight != GitHubInFlight {
			t.Errorf("unnamed %v: hosts %+v, want one with MaxInFlight %d", unnamed, hs, GitHubInFlight)
		}
	}
}

// TestSpentSearchFirst: with search spent for an hour and the client's
// first answer its refusal, search requests fail at once with the wait
// (beyond MaxDelay), none sent, and core requests are not slowed: the
// refusal said which budget is spent, nothing of the host's rate (virtual
// time). Before, every later search request waited the hour for the
// reset, and the refusal cut the host's adaptive rate to 1/36 a second,
// which held the first core request 10 s.
func TestSpentSearchFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newResourceServer(0, 100, time.Hour)
		c := NewClient(Options{Transport: handlerTransport{srv}, Concurrency: 4})
		ctx := t.Context()
		base := "http://api.example"
		start := time.Now()
		for i := range 3 {
			err := fetch(ctx, c, base+paths["search"])
			if !errors.Is(err, retry.ErrDelayTooLong) {
				t.Errorf("search %d: %v, want the wait beyond MaxDelay", i, err)
			}
		}
		if d := time.Since(start); d != 0 || srv.refused() != 1 {
			t.Errorf("search requests failed after %v, %d sent; want at once, 1 sent", d, srv.refused())
		}
		for i := range 10 {
			if err := fetch(ctx, c, base+paths["core"]); err != nil {
				t.Fatalf("core request %d: %v", i, err)
			}
		}
		// The first core request waits for the host's bucket at the
		// adaptive rate's start (2 a second: the search took its token),
		// the others for nothing.
		if d := time.Since(start); d > time.Second {
			t.Errorf("core requests done after %v, want within a second", d)
		}
	})
}
