package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httpclient"
)

// TestClientSpendsAnnouncedBucket: through `sluice serve`'s built-in
// config with the demo key (a bucket of 20 refilled at 1 a second,
// announced in the IETF fields), the client sends what the bucket holds at
// once, then one a second: the answers show the bucket spent (some say 0
// remain), none is refused. Pacing the bucket at its refill rate from the
// first answer, as before, kept 17 or more in it.
func TestClientSpendsAnnouncedBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	pub, _, _ := serveProcess(t)
	var mu sync.Mutex
	least, refused := int64(-1), 0
	c := httpclient.NewClient(httpclient.Options{Concurrency: 4, Observer: httpclient.ObserverFunc(func(e httpclient.Event) {
		if e.Kind == httpclient.Attempt && e.Status == http.StatusTooManyRequests {
			mu.Lock()
			refused++ // every refused attempt, retried or not
			mu.Unlock()
		}
	})})
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range jobs {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/item/%d", pub, i), nil)
				req.Header.Set("X-API-Key", "sluice-demo-key")
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				b, ok := httpclient.ParseBudget(resp.Header, time.Now())
				mu.Lock()
				if ok && (least < 0 || b.Remaining < least) {
					least = b.Remaining
				}
				mu.Unlock()
			}
		})
	}
	for i := range 22 {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if refused != 0 || least != 0 {
		t.Errorf("%d refused, fewest remaining %d; want none refused and the bucket spent (0)", refused, least)
	}
}
