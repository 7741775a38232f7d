package abuse

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// Attack: with the packed Redis layout (store URL layout=packed), many
// callers' states share one Redis hash, and a hash's fields have no expiry
// of their own. A caller who picks descriptor values that all land in one
// hash (a value starting with "}" puts every value of a rule in one hash
// slot, and packed_buckets=1 makes it one hash) could hope that the sweep
// of dead fields takes a live one (resetting its counter), or that dead
// fields pile up for ever.
//
// Bound: after 1,000 fresh callers in the victim's hash, which the sweeps
// run through, a victim that had used 2 of 3 is admitted once more and
// then refused, and the hash holds every live caller (1,001 states and the
// sweep's mark); a flood of 500 states that decay within a second leaves a
// hash that expires as a whole once they have decayed.
func TestPackedHashesBounded(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, dir, "rules.yaml", `
domain: abuse
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	r := startRLS(t, dir, "--store", rs.URL()+"?layout=packed&packed_buckets=1")
	victim := [][2]string{{"user", "}victim"}}
	for i := range 2 {
		if got := r.decide(t, "abuse", 1, victim); got != http.StatusOK {
			t.Fatalf("victim's request %d: %d, want 200", i+1, got)
		}
	}
	flood(t, r, "user", 1000, 3)
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if got := r.decide(t, "abuse", 1, victim); got != want {
			t.Fatalf("victim's request %d after 1000 fresh callers in its hash: %d, want %d", i+3, got, want)
		}
	}
	users := hashes(t, rs)
	if len(users) != 1 {
		t.Fatalf("hashes %v: want one, the rule's", users)
	}
	for h, n := range users {
		if n != 1002 {
			t.Fatalf("hash %q has %d fields, want the 1001 live states and the sweep's mark", h, n)
		}
	}
	flood(t, r, "ip", 500, 1)
	if n := len(hashes(t, rs)); n != 2 {
		t.Fatalf("%d hashes after the second flood, want 2", n)
	}
	eventually(t, 10*time.Second, func() error {
		if n := len(hashes(t, rs)); n != 1 {
			return fmt.Errorf("%d hashes, want 1: the decayed flood's hash still there", n)
		}
		return nil
	})
}

// flood charges n fresh values of descriptor key, each starting with "}",
// hits each, from 4 workers.
func flood(t *testing.T, r *rlsProc, key string, n, hits int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{}
			for i := w; i < n; i += 4 {
				if _, _, err := r.tryDecide(c, "abuse", hits, [][2]string{{key, fmt.Sprintf("}%s-%d", key, i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// hashes returns the Redis hashes of rs and their fields.
func hashes(t *testing.T, rs *redistest.Server) map[string]int64 {
	t.Helper()
	v, err := rs.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := v.([]any)
	out := map[string]int64{}
	for _, k := range keys {
		s, _ := k.(string)
		typ, err := rs.Do("TYPE", s)
		if typ == "none" {
			continue // expired since KEYS
		}
		if err != nil || typ != "hash" {
			t.Fatalf("Redis key %q: type %v, %v; want only hashes", s, typ, err)
		}
		n, err := rs.Do("HLEN", s)
		if err != nil {
			t.Fatal(err)
		}
		out[s], _ = n.(int64)
	}
	return out
}
