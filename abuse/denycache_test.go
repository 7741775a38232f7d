package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestDenyCacheFloodBounded: sluice rls with the deprecated --deny-cache
// (now the local over-limit cache, here at its smallest size) flooded with
// distinct identities, each over its limit at once: the start says the
// spelling is deprecated, the cache holds no more than its bytes, and
// every denial it did not keep is counted as evicted. On the memory store:
// the one cache works on any store now.
func TestDenyCacheFloodBounded(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "flood.yaml", "domain: flood\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	const size = 512 << 10
	r := startRLS(t, dir, "--deny-cache", "--local-cache-size-bytes", fmt.Sprint(size))
	if !strings.Contains(r.output(), "--deny-cache is deprecated") {
		t.Errorf("no deprecation warning at start:\n%s", r.output())
	}
	const users = 5000 // about half of them fit
	c := client(t)
	err := parallel(users, 8, func(i int) error {
		code, body, err := r.tryDecide(c, "flood", 2, [][2]string{{"user", fmt.Sprintf("flooder-%06d", i)}})
		if err == nil && code != http.StatusTooManyRequests {
			err = fmt.Errorf("user %d: %d %s, want 429", i, code, body)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	m := scrape(t, r.http)
	bytes := m.value(t, "ratelimit_localcache_bytes")
	entries := m.value(t, "ratelimit_localcache_entryCount")
	evicted := m.value(t, "ratelimit_localcache_evacuateCount")
	if bytes > size || entries == 0 || evicted == 0 || entries+evicted != users {
		t.Errorf("after %d over-limit identities: %v bytes (at most %d), %v entries, %v evicted; want entries + evicted = %d",
			users, bytes, size, entries, evicted, users)
	}
	r.alive(t)
}
