package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// Attack: callers choose descriptor values (a user ID, a header) of any
// length, and as many fresh ones as they like. With the readable key in
// every Redis key name, each fresh value of 1 KiB cost Redis a 1 KiB name
// more per key; and a hash of keys could let one caller land on another's
// counter.
//
// Bound: every Redis key sluice rls writes is a compact name whatever the
// descriptor's length (at most 30 bytes with the default prefix; a fixed
// window's counter adds its window, ":period:start", up to 64), and
// after 1,000 fresh callers with 1 KiB values charged at once, a victim
// that had used 2 of 3 is admitted once more and then refused: no one's
// counter was reset or shared.
func TestRedisKeyNamesBounded(t *testing.T) {
	t.Parallel()
	r, rs := rlsOnRedis(t, "user")
	victim := [][2]string{{"user", "victim"}}
	for i := range 2 {
		if got := r.decide(t, "abuse", 1, victim); got != http.StatusOK {
			t.Fatalf("victim's request %d: %d, want 200", i+1, got)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{}
			for i := range 250 {
				v := fmt.Sprintf("%d-%d-%s", w, i, strings.Repeat("x", 1024))
				if _, _, err := r.tryDecide(c, "abuse", 3, [][2]string{{"user", v}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if got := r.decide(t, "abuse", 1, victim); got != want {
			t.Fatalf("victim's request %d after 1000 fresh callers: %d, want %d", i+3, got, want)
		}
	}
	v, err := rs.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := v.([]any)
	if len(keys) < 1000 {
		t.Fatalf("%d Redis keys, want one per caller at least (1001)", len(keys))
	}
	for _, k := range keys {
		s, _ := k.(string)
		name, window, counter := strings.Cut(s, ":3600000:")
		if len(name) > 30 || (counter && len(window) > 20) {
			t.Fatalf("Redis key %.60q is %d bytes, want a name of at most 30 whatever the descriptor", s, len(s))
		}
	}
}

// rlsOnRedis starts a redis-server and sluice rls on it, with flags, and
// one rule: domain abuse, descriptor key, 3 an hour.
func rlsOnRedis(t *testing.T, key string, flags ...string) (*rlsProc, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", `
domain: abuse
descriptors:
  - key: `+key+`
    rate_limit: {unit: hour, requests_per_unit: 3}
`)
	return startRLS(t, dir, append([]string{"--store", rs.URL()}, flags...)...), rs
}
