package abuse

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Attack: memstore's key hash had a seed-independent collision: an 8-byte
// word of the key equal to a public constant (0xe7037ed1a0b428db, the
// bytes DB 28 B4 A0 D1 7E 03 E7) zeroed a multiplication whatever the
// secret, so that two keys of one length ending in that word and the same
// 8 bytes shared one state. Through the gateway it was reachable with the
// path action and a percent-encoded path: one caller's requests spent
// another path's limit.
//
// Bound: the spelling does not get through the binary at all — the path
// holds a control byte (%03), which the gateway refuses with 400 before
// any rule, and header values and the RLS's descriptor values (UTF-8
// strings) cannot carry the raw bytes — and if it did, the two paths
// would not share a limit. The hash itself (every mixing step keyed by
// the store's secret) is proven by memstore's
// TestHashNoSecretFreeCollisions, which drives the hash directly.
func TestHashCollisionSpelling(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	cfg := writeFile(t, t.TempDir(), "gateway.yaml", fmt.Sprintf(`
upstream: %s
routes:
  - path: /
    rate_limits:
      - actions: [{path: {}}]
rules:
  domain: abuse
  descriptors:
    - key: path
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`, up.srv.URL))
	g := startServe(t, cfg)
	c := client(t)
	// The storage key is "sl:token_bucket:3600000ms:abuse_path_<path>_":
	// the constant's word starts the last 16 bytes, so under the old hash
	// the two keys' hashes depended on their length alone.
	const word = "%DB%28%B4%A0%D1%7E%03%E7"
	a := "/alice-" + word + "/x/y/z/"
	b := "/mlory-" + word + "/x/y/z/"
	codeA, _, _ := do(t, c, "GET", g.url+a)
	codeB, _, _ := do(t, c, "GET", g.url+b)
	switch {
	case codeA == http.StatusBadRequest && codeB == http.StatusBadRequest:
	case codeA == http.StatusOK && codeB == http.StatusTooManyRequests:
		t.Errorf("GET %s admitted, then GET %s denied: the two paths share a limit (a hash collision)", a, b)
	default:
		t.Logf("GET %s: %d, GET %s: %d (the gateway let the control byte through)", a, codeA, b, codeB)
		if codeB != http.StatusOK {
			t.Errorf("GET %s: %d, want 200 (its own limit) or 400 (refused)", b, codeB)
		}
	}
	for _, r := range up.requests() {
		if strings.Contains(r.Path, "\x03") {
			t.Errorf("the upstream received a path with a control byte: %q", r.RawPath)
		}
	}
	// The same bytes in a header value never reach a rule either.
	if code := rawRequest(t, hostPort(g.url), "GET /h HTTP/1.1\r\nHost: abuse\r\nX-Client: \xdb\x28\xb4\xa0\xd1\x7e\x03\xe7\r\nConnection: close\r\n\r\n"); code != http.StatusBadRequest {
		t.Errorf("a header value with the control byte: %d, want 400 (Go's server refuses it)", code)
	}
}
