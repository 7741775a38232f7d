package abuse

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The decision endpoint (decision: in the gateway config) answers the
// proxy in front about a request it describes in forwarding headers. Its
// attacks: describe a request without being the proxy, spell the path
// so that it matches another route or key, mint identities, send
// headers too big to hold.

// decisionServe runs `sluice serve` as a whole-listener decision endpoint
// for Traefik/Caddy's forwarded headers, trusting 127.0.0.2 only:
// anonymous callers get a burst of 3 on /api/, nothing refills within
// the test.
func decisionServe(t *testing.T, extra string) *gatewayProc {
	t.Helper()
	dir := t.TempDir()
	g, err := tryServe(t, writeFile(t, dir, "gateway.yaml", `
decision: {proxy: forwarded}
identity:
  trusted_proxies: [127.0.0.2]
connections: {max_header_bytes: 8192}
routes:
  - path: /
  - path: /api/
    rate_limits:
      - actions: [{identity: {}}]
rules:
  domain: abuse
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 3, burst: 3}
`+extra))
	skipIfUnknown(t, err, "sluice serve has no decision endpoint")
	return g
}

// clientAt is client(t) whose connections come from the loopback address
// ip (Linux routes all of 127.0.0.0/8 to lo).
func clientAt(t *testing.T, ip string) *http.Client {
	c := client(t)
	tr := c.Transport.(*http.Transport)
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}).DialContext
	return c
}

// decide asks g about GET target for the client address xff, as the
// proxy would.
func decide(t *testing.T, c *http.Client, g *gatewayProc, target, xff string, hdr ...string) int {
	t.Helper()
	code, _, _ := do(t, c, "GET", g.url+"/auth", append([]string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", target,
		"X-Forwarded-Host", "api.example", "X-Forwarded-For", xff}, hdr...)...)
	return code
}

// Attack: talk to the decision endpoint directly, not through the proxy,
// naming a victim's address in X-Forwarded-For to spend its budget (or an
// address of one's own choosing to get a fresh one each time), and, through
// a proxy that appends to X-Forwarded-For, forge the left-most hop.
//
// Bound: from a peer outside trusted_proxies every decision request is
// answered 403 and charges nothing; through the trusted proxy the client
// is the right-most untrusted hop, so the forged one is ignored.
func TestDecisionForgedForwarding(t *testing.T) {
	t.Parallel()
	g := decisionServe(t, "")
	evil, proxy := client(t), clientAt(t, "127.0.0.2")
	for i := range 10 {
		if code := decide(t, evil, g, "/api/x", "198.51.100.1"); code != http.StatusForbidden {
			t.Fatalf("untrusted decision request %d: %d, want 403", i, code)
		}
	}
	// The attacker through the proxy, forging the victim as the first hop.
	for range 3 {
		decide(t, proxy, g, "/api/x", "198.51.100.1, 203.0.113.66")
	}
	var got []int
	for range 4 {
		got = append(got, decide(t, proxy, g, "/api/x", "198.51.100.1"))
	}
	if fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("the victim after 10 direct and 3 forged requests: %v, want its whole burst [200 200 200 429]", got)
	}
	if code := decide(t, proxy, g, "/api/x", "198.51.100.1, 203.0.113.66"); code != http.StatusTooManyRequests {
		t.Errorf("the attacker's fourth request through the proxy: %d, want 429 (its own budget, spent)", code)
	}
}

// Attack: spell the original path in X-Forwarded-Uri so that it matches
// another route (an unlimited one) or another key: doubled slashes, dot
// segments, percent-encodings, encoded separators that an upstream may
// decode.
//
// Bound: the path is cleaned and matched as a proxied request's is: every
// spelling of /api/x is one budget; an encoded / or \, a backslash, a
// control character, an overlong UTF-8 and a target that is not a path
// are refused 400, as they are when proxied.
func TestDecisionPathSpellings(t *testing.T) {
	t.Parallel()
	g := decisionServe(t, "")
	c := clientAt(t, "127.0.0.2")
	var got []int
	for _, p := range []string{"/api/x", "//api/x", "/api/./x", "/./api/x", "/api/y/../x", "/api/%78", "/%61pi/x", "/api/x?a=1"} {
		got = append(got, decide(t, c, g, p, "198.51.100.2"))
	}
	if fmt.Sprint(got) != "[200 200 200 429 429 429 429 429]" {
		t.Errorf("spellings of /api/x: %v, want one burst of 3 [200 200 200 429 429 429 429 429]", got)
	}
	for _, p := range []string{"/api%2fx", "/api%5Cx", "/api\\x", "/api/%00x", "/%C0%AFapi/x", "api/x", "*", "http://a/api/x"} {
		if code := decide(t, c, g, p, "198.51.100.3"); code != http.StatusBadRequest {
			t.Errorf("X-Forwarded-Uri %q: %d, want 400", p, code)
		}
	}
	if code := decide(t, c, g, "/api/x", "198.51.100.3"); code != http.StatusOK {
		t.Errorf("after its refused spellings, the client's first real request: %d, want 200 (nothing charged)", code)
	}
}

// Attack: headers too big to hold: a huge X-Forwarded-Uri, a long
// X-Forwarded-For chain, a second X-Forwarded-Uri to be believed instead
// of the proxy's.
//
// Bound: a header block over connections.max_header_bytes is answered 431
// (or the connection reset) and never decided, charging nothing; a long chain is walked at most 64 hops; two values of
// one forwarding header are refused 400; the process keeps serving.
func TestDecisionHugeHeaders(t *testing.T) {
	t.Parallel()
	g := decisionServe(t, "")
	c := clientAt(t, "127.0.0.2")
	// Go's server answers 431 and hangs up while the client may still be
	// writing: the client sees the 431 or a reset, never a decision.
	code, _, _, err := tryDo(c, "GET", g.url+"/auth", "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/api/"+strings.Repeat("x", 16<<10),
		"X-Forwarded-Host", "api.example", "X-Forwarded-For", "198.51.100.4")
	if err == nil && code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 16 KiB X-Forwarded-Uri over max_header_bytes 8192: %d, want 431", code)
	}
	chain := strings.TrimSuffix(strings.Repeat("127.0.0.2, ", 500), ", ")
	if code := decide(t, c, g, "/api/x", "198.51.100.4, "+chain); code != http.StatusOK {
		t.Errorf("a 500-hop X-Forwarded-For: %d, want 200 (walked, bounded)", code)
	}
	code, _, _ = do(t, c, "GET", g.url+"/auth", "X-Forwarded-Method", "GET", "X-Forwarded-Host", "a", "X-Forwarded-For", "198.51.100.4",
		"X-Forwarded-Uri", "/", "X-Forwarded-Uri", "/api/x")
	if code != http.StatusBadRequest {
		t.Errorf("two X-Forwarded-Uri: %d, want 400", code)
	}
	g.alive(t)
	var got []int
	for range 4 {
		got = append(got, decide(t, c, g, "/api/x", "198.51.100.4"))
	}
	if fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("198.51.100.4 after its huge headers: %v, want its whole burst [200 200 200 429] (the 431 charged nothing; the 500-hop chain ends in trusted hops, so it is the proxy's)", got)
	}
}

// Attack: the identity flood of TestIdentityFlood, through the decision
// endpoint: each fresh identity is a header value of a request the proxy
// describes.
//
// Bound: as TestIdentityFlood's through the other doors.
func TestDecisionIdentityFlood(t *testing.T) {
	t.Parallel()
	const maxKeys, holders = 1024, 50
	dir := t.TempDir()
	g, err := tryServe(t, writeFile(t, dir, "gateway.yaml", "decision: {proxy: forwarded}\nidentity: {trusted_proxies: [127.0.0.0/8]}\n"+
		floodGateway(maxKeys, true)))
	skipIfUnknown(t, err, "sluice serve has no decision endpoint")
	identityFlood(t, floodDoor{g.proc, g.admin, func(c *http.Client, id string, quota bool) (int, error) {
		target := "/w"
		if quota {
			target = "/q"
		}
		code, _, _, err := tryDo(c, "GET", g.url+"/auth", "X-Forwarded-Method", "GET", "X-Forwarded-Uri", target,
			"X-Forwarded-Host", "api.example", "X-Forwarded-For", "198.51.100.9", "X-Client", id)
		return code, err
	}}, client(t), maxKeys, holders, true)
}
