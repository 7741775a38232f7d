package abuse

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFetchSpentSearchDoesNotStallCore: `sluice fetch` against a server
// that keeps one budget per resource as GitHub does (X-RateLimit-Resource:
// search for /search/..., core for the rest), with search spent for an
// hour: the search URLs fail at once (the wait is beyond --max-delay),
// only the first sent, and every core URL is fetched, none refused. With
// one budget per host the search refusal held the whole host for the
// hour, and the core URLs with it; then the later search URL waited the
// hour.
func TestFetchSpentSearchDoesNotStallCore(t *testing.T) {
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	var core, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-RateLimit-Reset", reset)
		if strings.HasPrefix(r.URL.Path, "/search/") {
			refused.Add(1)
			h.Set("X-RateLimit-Limit", "30")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Resource", "search")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"API rate limit exceeded"}`)
			return
		}
		n := core.Add(1)
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(5000-n, 10))
		h.Set("X-RateLimit-Resource", "core")
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	// One at a time, a search URL first and another among the core ones
	// (GitHub's API gets one at a time anyway).
	args := []string{"fetch", "--json", "--robots=false", "--concurrency", "1", srv.URL + "/search/issues?q=x"}
	for i := range 20 {
		args = append(args, fmt.Sprintf("%s/repos/o/r%d", srv.URL, i))
		if i == 9 {
			args = append(args, srv.URL+"/search/issues?q=y")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sluiceBinary(t), args...).Output()
	var sum struct{ Requests, Succeeded, Failed int }
	if jerr := json.Unmarshal(out, &sum); jerr != nil {
		t.Fatalf("sluice fetch: %v, output %q (%v)", err, out, jerr)
	}
	if sum.Succeeded != 20 || sum.Failed != 2 || core.Load() != 20 || refused.Load() != 1 {
		t.Errorf("%+v, %d core requests, %d refused; want the 20 core URLs fetched, the 2 search ones failed, 1 sent (err %v)", sum, core.Load(), refused.Load(), err)
	}
}
