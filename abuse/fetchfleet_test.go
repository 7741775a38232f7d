package abuse

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestFetchFleetSharesHostBudget: two `sluice fetch` processes on one
// Redis (--store) stay within one host's limit together: the server, a
// token bucket at the rate each is given, refuses none of their requests.
// Without --store each process would go at the whole rate, twice it
// together.
func TestFetchFleetSharesHostBudget(t *testing.T) {
	redistest.Require(t)
	rs := redistest.Start(t)
	const rate = 20 // per second, the server's and each process's
	store := memstore.New(memstore.Options{SweepInterval: -1})
	defer store.Close()
	var sent, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		// Burst 3: what two loopback connections can bunch together.
		d, err := store.Apply(r.Context(), ratelimit.Request{Key: "host", Limit: ratelimit.Limit{Rate: rate, Period: time.Second, Burst: 3}, N: 1})
		if err != nil || !d.Allowed {
			refused.Add(1)
			w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.DurationCeil(d.RetryAfter), 10))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	bin := sluiceBinary(t)
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for p := range 2 {
		args := []string{"fetch", "--json", "--robots=false", "--rate", strconv.Itoa(rate), "--store", rs.URL()}
		for i := range 30 {
			args = append(args, fmt.Sprintf("%s/p%d/%d", srv.URL, p, i))
		}
		wg.Go(func() {
			outs[p], errs[p] = exec.Command(bin, args...).Output()
		})
	}
	wg.Wait()
	for p := range 2 {
		if errs[p] != nil {
			t.Errorf("process %d: %v: %s", p, errs[p], outs[p])
		}
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the server refused %d of %d requests, want none: the two processes went faster than one host's rate together", n, sent.Load())
	}
}
