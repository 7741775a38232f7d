package gateway_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// The keys file of the tests: key-alice is user alice, key-bob user bob.
var testKeys = fmt.Sprintf("%s alice pro\n%s bob\n", identity.HashKey("key-alice"), identity.HashKey("key-bob"))

// baseConfig is a gateway on the memory store in front of builtin:echo:
// anonymous callers get 3 requests per IP, users 5 pooled across their
// devices, both token buckets refilled once an hour (so that nothing
// refills during a test).
const baseConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
identity:
  api_keys_file: keys.txt
routes:
  - path: /
    rate_limits:
      - actions:
          - identity: {}
rules:
  domain: t
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 3}
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: hour, requests_per_unit: 5}
`

// server is a gateway serving on loopback.
type server struct {
	g      *gateway.Gateway
	url    string // public base URL
	admin  string // admin base URL
	dir    string
	file   string // the config file
	cancel context.CancelFunc
	done   chan error
}

// start writes cfg (and the test keys) to dir and serves it. The gateway
// stops when the test ends.
func start(t *testing.T, dir, cfg string, extra ...string) *server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	file := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(file, []byte(cfg), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "keys.txt"), []byte(testKeys), 0o644))
	for i := 0; i+1 < len(extra); i += 2 {
		must(t, os.WriteFile(filepath.Join(dir, extra[i]), []byte(extra[i+1]), 0o644))
	}
	c, err := gateway.ParseFile(file)
	must(t, err)
	g, err := gateway.New(t.Context(), c, gateway.Options{})
	must(t, err)
	ln, err := net.Listen("tcp", c.Listen)
	must(t, err)
	adm, err := net.Listen("tcp", c.AdminListen)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{g: g, url: "http://" + ln.Addr().String(), admin: "http://" + adm.Addr().String(),
		dir: dir, file: file, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- g.Serve(ctx, ln, adm) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *server) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if err := s.g.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// clientFrom returns a client whose connections come from the loopback
// address ip (Linux routes all of 127.0.0.0/8 to lo), so the gateway sees
// a distinct RemoteAddr per client without trusting any header.
func clientFrom(t *testing.T, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type resp struct {
	code int
	h    http.Header
	body string
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	must(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	return resp{res.StatusCode, res.Header, string(b)}
}

// codes sends n requests and returns their status codes.
func codes(t *testing.T, c *http.Client, url string, n int, hdr ...string) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		out[i] = get(t, c, url, hdr...).code
	}
	return out
}

func TestOneKeyFromThreeIPsSharesOneBucket(t *testing.T) {
	t.Parallel()
	s := start(t, "", baseConfig)
	var got []int
	for i := range 6 {
		ip := fmt.Sprintf("127.0.0.%d", 2+i%3)
		got = append(got, get(t, clientFrom(t, ip), s.url+"/v1/x", "X-API-Key", "key-alice").code)
	}
	if want := []int{200, 200, 200, 200, 200, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alice from 3 IPs: %v, want %v (one bucket of 5)", got, want)
	}
	// The same through a trusted proxy: three client IPs in X-Forwarded-For.
	p := start(t, "", strings.Replace(baseConfig, "identity:\n", "identity:\n  trusted_proxies: [127.0.0.1]\n", 1))
	c := clientFrom(t, "127.0.0.1")
	got = got[:0]
	for i := range 6 {
		got = append(got, get(t, c, p.url+"/", "Authorization", "Bearer key-bob", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i%3)).code)
	}
	if want := []int{200, 200, 200, 200, 200, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("bob via trusted proxy from 3 IPs: %v, want %v", got, want)
	}
	// Anonymous callers behind the trusted proxy are limited per forwarded IP.
	for _, ip := range []string{"198.51.100.1", "198.51.100.2"} {
		if got := codes(t, c, p.url+"/", 4, "X-Forwarded-For", ip); fmt.Sprint(got) != "[200 200 200 429]" {
			t.Errorf("anonymous %s via trusted proxy: %v, want [200 200 200 429]", ip, got)
		}
	}
}

func TestAnonymousPerIPAndSpoofing(t *testing.T) {
	t.Parallel()
	s := start(t, "", baseConfig)
	a, b := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.3")
	// A spoofed X-Forwarded-For from an untrusted peer changes nothing:
	// every request counts against the peer's own address.
	var got []int
	for i := range 4 {
		got = append(got, get(t, a, s.url+"/", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i), "Forwarded", fmt.Sprintf("for=203.0.113.%d", i)).code)
	}
	if fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("127.0.0.2 with spoofed X-Forwarded-For: %v, want [200 200 200 429]", got)
	}
	if got := codes(t, b, s.url+"/", 4); fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("127.0.0.3: %v, want its own bucket [200 200 200 429]", got)
	}
	// A spoofed user header is ignored too (no trusted proxy).
	if r := get(t, b, s.url+"/", "X-User", "alice"); r.code != 429 {
		t.Errorf("127.0.0.3 with X-User: %d, want 429", r.code)
	}
}

func TestBadCredential401(t *testing.T) {
	t.Parallel()
	s := start(t, "", baseConfig)
	c := clientFrom(t, "127.0.0.2")
	for _, h := range [][]string{
		{"X-API-Key", "key-mallory"},
		{"Authorization", "Bearer key-mallory"},
		{"Authorization", "Basic YTpi"},
		{"X-API-Key", "key-alice", "Authorization", "Bearer key-bob"},
	} {
		r := get(t, c, s.url+"/", h...)
		if r.code != 401 || r.h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%v: %d %s, want 401 problem+json", h, r.code, r.h.Get("Content-Type"))
		}
	}
	// 401s consumed nothing: the anonymous bucket is full.
	if got := codes(t, c, s.url+"/", 4); fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("after 401s: %v, want [200 200 200 429]", got)
	}
}

func TestHeaderModesOverHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode    string
		present []string
		absent  []string
	}{
		{"ietf", []string{"RateLimit", "RateLimit-Policy", "Retry-After"}, []string{"X-RateLimit-Limit"}},
		{"legacy", []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"}, []string{"RateLimit"}},
		{"opaque", nil, []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "Retry-After"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			s := start(t, "", baseConfig+"headers: "+tc.mode+"\n")
			c := clientFrom(t, "127.0.0.2")
			codes(t, c, s.url+"/", 3)
			r := get(t, c, s.url+"/")
			if r.code != 429 || r.h.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("4th request: %d %s, want 429 problem+json", r.code, r.h.Get("Content-Type"))
			}
			for _, h := range tc.present {
				if r.h.Get(h) == "" {
					t.Errorf("429 lacks %s: %v", h, r.h)
				}
			}
			for _, h := range tc.absent {
				if r.h.Get(h) != "" {
					t.Errorf("429 has %s: %q", h, r.h.Get(h))
				}
			}
			if named := strings.Contains(r.body, `"per-ip"`); named == (tc.mode == "opaque") {
				t.Errorf("429 body %s names the policy: %v", r.body, named)
			}
		})
	}
	s := start(t, "", baseConfig)
	r := get(t, clientFrom(t, "127.0.0.2"), s.url+"/")
	if r.h.Get("RateLimit-Policy") != `"per-ip";q=3;w=3600` || r.h.Get("RateLimit") != `"per-ip";r=2;t=1200` {
		t.Errorf("ietf headers: RateLimit-Policy %q RateLimit %q", r.h.Get("RateLimit-Policy"), r.h.Get("RateLimit"))
	}
}

func metric(t *testing.T, s *server, prefix string) string {
	t.Helper()
	r := get(t, http.DefaultClient, s.admin+"/metrics")
	for _, l := range strings.Split(r.body, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(l, prefix))
		}
	}
	return ""
}

func TestShadowModeAndMetrics(t *testing.T) {
	t.Parallel()
	s := start(t, "", baseConfig+"shadow: true\n")
	c := clientFrom(t, "127.0.0.2")
	if got := codes(t, c, s.url+"/", 5); fmt.Sprint(got) != "[200 200 200 200 200]" {
		t.Errorf("shadow mode: %v, want all 200", got)
	}
	if got := metric(t, s, `sluice_gateway_shadow_denials_total{rule="per-ip"}`); got != "2" {
		t.Errorf("shadow denials of per-ip = %q, want 2", got)
	}
	if got := metric(t, s, `sluice_gateway_decisions_total{outcome="allowed",rule="per-ip"}`); got != "3" {
		t.Errorf("allowed decisions of per-ip = %q, want 3", got)
	}
	if got := metric(t, s, "sluice_gateway_decision_duration_seconds_count"); got != "5" {
		t.Errorf("decision latency count = %q, want 5", got)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := get(t, http.DefaultClient, s.admin+p); r.code != 200 {
			t.Errorf("GET %s = %d, want 200", p, r.code)
		}
	}
}

func TestReloadGoodAndBad(t *testing.T) {
	t.Parallel()
	s := start(t, "", baseConfig)
	c := clientFrom(t, "127.0.0.2")
	if got := codes(t, c, s.url+"/", 4); fmt.Sprint(got) != "[200 200 200 429]" {
		t.Fatalf("before reload: %v", got)
	}
	// A good config: per-user changes, per-ip does not. The per-ip counter
	// survives the swap, and the keep-alive connection is not dropped.
	good := strings.Replace(baseConfig, "requests_per_unit: 5", "requests_per_unit: 50", 1)
	must(t, os.WriteFile(s.file, []byte(good), 0o644))
	must(t, s.g.ReloadFile(s.file))
	if r := get(t, c, s.url+"/"); r.code != 429 {
		t.Errorf("per-ip after a reload that kept it: %d, want 429 (counter kept)", r.code)
	}
	if r := get(t, c, s.url+"/", "X-API-Key", "key-alice"); r.h.Get("RateLimit-Policy") != `"per-user";q=50;w=3600` {
		t.Errorf("per-user after reload: RateLimit-Policy %q, want q=50", r.h.Get("RateLimit-Policy"))
	}
	// The kill switch: all limiting off.
	must(t, os.WriteFile(s.file, []byte(good+"disabled: true\n"), 0o644))
	must(t, s.g.ReloadFile(s.file))
	if r := get(t, c, s.url+"/"); r.code != 200 || r.h.Get("RateLimit") != "" {
		t.Errorf("disabled: %d RateLimit %q, want 200 without headers", r.code, r.h.Get("RateLimit"))
	}
	// A bad config is refused with every problem, and the old one serves.
	bad := strings.Replace(good, "unit: hour", "unit: fortnight", 1) + "headers: loud\n"
	must(t, os.WriteFile(s.file, []byte(bad), 0o644))
	err := s.g.ReloadFile(s.file)
	if err == nil || !strings.Contains(err.Error(), "gateway.yaml:16: rules.descriptors[0].rate_limit.unit: unknown unit") ||
		!strings.Contains(err.Error(), "gateway.yaml:19: headers:") {
		t.Errorf("bad reload = %v, want both problems with file:line", err)
	}
	if r := get(t, c, s.url+"/"); r.code != 200 {
		t.Errorf("after a refused reload: %d, want 200 (still disabled)", r.code)
	}
	// Re-enable: the per-ip bucket is still empty.
	must(t, os.WriteFile(s.file, []byte(good), 0o644))
	must(t, s.g.ReloadFile(s.file))
	if r := get(t, c, s.url+"/"); r.code != 429 {
		t.Errorf("re-enabled: %d, want 429", r.code)
	}
}

func TestQuotaSurvivesRestart(t *testing.T) {
	t.Parallel()
	cfg := `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
snapshot: {file: state.snap, interval: 1h}
identity: {api_keys_file: keys.txt}
routes:
  - path: /
    rate_limits:
      - actions: [{generic_key: {descriptor_value: monthly}}, {identity: {}}]
rules:
  domain: t
  descriptors:
    - key: generic_key
      value: monthly
      descriptors:
        - key: user
          quota: {period: month, limit: 3}
`
	dir := t.TempDir()
	s := start(t, dir, cfg)
	c := clientFrom(t, "127.0.0.2")
	if got := codes(t, c, s.url+"/", 2, "X-API-Key", "key-alice"); fmt.Sprint(got) != "[200 200]" {
		t.Fatalf("first run: %v", got)
	}
	s.stop(t) // writes the snapshot
	if _, err := os.Stat(filepath.Join(dir, "state.snap")); err != nil {
		t.Fatalf("no snapshot after stop: %v", err)
	}
	s = start(t, dir, cfg)
	r := get(t, c, s.url+"/", "X-API-Key", "key-alice")
	if r.code != 200 || !strings.Contains(r.h.Get("RateLimit"), ";r=0;") {
		t.Errorf("after restart: %d RateLimit %q, want 200 with r=0", r.code, r.h.Get("RateLimit"))
	}
	r = get(t, c, s.url+"/", "X-API-Key", "key-alice")
	if r.code != 429 || !strings.Contains(r.body, "monthly quota") {
		t.Errorf("4th request of the month: %d %s, want 429 monthly quota", r.code, r.body)
	}
}

func TestUpstreamTimeoutAndDrain(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
			io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go up.Serve(ln)
	t.Cleanup(func() { up.Close() })
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: http://%s
routes:
  - path: /slow
    upstream_timeout: 100ms
  - path: /
`, ln.Addr())
	s := start(t, "", cfg)
	c := clientFrom(t, "127.0.0.2")
	if r := get(t, c, s.url+"/slow"); r.code != http.StatusGatewayTimeout {
		t.Errorf("slow upstream: %d, want 504", r.code)
	}
	<-arrived
	// Graceful shutdown: a request in flight when the gateway is told to
	// stop still completes.
	var wg sync.WaitGroup
	var inflight resp
	wg.Add(1)
	go func() {
		defer wg.Done()
		inflight = get(t, c, s.url+"/hold")
	}()
	<-arrived
	s.cancel()
	s.cancel = nil
	// /readyz turns 503 (or the admin listener is already closed).
	for {
		res, err := http.Get(s.admin + "/readyz")
		if err != nil {
			break
		}
		res.Body.Close()
		if res.StatusCode == 503 {
			break
		}
	}
	close(release)
	wg.Wait()
	if inflight.code != 200 || inflight.body != "done" {
		t.Errorf("in-flight request during shutdown: %d %q, want 200 done", inflight.code, inflight.body)
	}
	if err := <-s.done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	must(t, s.g.Close())
}

func TestTwoGatewaysOnRedisShareOneBudget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	rs := redistest.Start(t)
	// A generous timeout: a call past it is answered by the failure
	// policy, locally, which on a loaded machine admits a sixth request.
	cfg := strings.Replace(baseConfig, "upstream: builtin:echo", "upstream: builtin:echo\nstore: "+rs.URL()+"?timeout=5s", 1)
	a, b := start(t, "", cfg), start(t, "", cfg)
	c := clientFrom(t, "127.0.0.2")
	var got []int
	for i := range 6 {
		s := a
		if i%2 == 1 {
			s = b
		}
		got = append(got, get(t, c, s.url+"/", "X-API-Key", "key-alice").code)
	}
	if fmt.Sprint(got) != "[200 200 200 200 200 429]" {
		t.Errorf("alice across two gateways on one Redis: %v, want one budget of 5 [200 200 200 200 200 429]", got)
	}
	if got := []int{get(t, c, a.url+"/").code, get(t, c, b.url+"/").code, get(t, c, a.url+"/").code, get(t, c, b.url+"/").code}; fmt.Sprint(got) != "[200 200 200 429]" {
		t.Errorf("anonymous across two gateways: %v, want [200 200 200 429]", got)
	}
}

// The upstream sees X-Forwarded-For set from the peer, and a client's own
// X-Forwarded-For only when the peer is a trusted proxy.
func TestForwardedHeadersUpstream(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 4)
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Forwarded-For")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go up.Serve(ln)
	t.Cleanup(func() { up.Close() })
	cfg := fmt.Sprintf("upstream: http://%s\nroutes: [{path: /}]\n", ln.Addr())
	for _, tc := range []struct {
		cfg  string
		want string
	}{
		{cfg, "127.0.0.2"},
		{cfg + "identity: {trusted_proxies: [127.0.0.2]}\n", "198.51.100.7, 127.0.0.2"},
	} {
		s := start(t, "", "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n"+tc.cfg)
		get(t, clientFrom(t, "127.0.0.2"), s.url+"/", "X-Forwarded-For", "198.51.100.7")
		if got := <-seen; got != tc.want {
			t.Errorf("upstream X-Forwarded-For = %q, want %q", got, tc.want)
		}
	}
}

// hs256 returns a JWT signed with secret.
func hs256(secret []byte, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(claims))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signing))
	return signing + "." + enc(m.Sum(nil))
}

// A JWT (HS256, key from a file) makes the caller its subject: one bucket
// per user whichever key or token it uses, and a bad or expired token is 401.
func TestJWTIdentity(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	cfg := strings.Replace(baseConfig, "  api_keys_file: keys.txt\n", "  api_keys_file: keys.txt\n  jwt: {alg: HS256, key_file: jwt.key, tier_claim: plan}\n", 1)
	s := start(t, "", cfg, "jwt.key", string(secret)+"\n")
	c := clientFrom(t, "127.0.0.2")
	exp := time.Now().Add(time.Hour).Unix()
	tok := hs256(secret, fmt.Sprintf(`{"sub":"alice","plan":"pro","exp":%d}`, exp))
	var got []int
	for i := range 6 {
		if i%2 == 0 {
			got = append(got, get(t, c, s.url+"/", "Authorization", "Bearer "+tok).code)
		} else {
			got = append(got, get(t, c, s.url+"/", "X-API-Key", "key-alice").code)
		}
	}
	if fmt.Sprint(got) != "[200 200 200 200 200 429]" {
		t.Errorf("alice by JWT and by key: %v, want one bucket of 5", got)
	}
	for name, bad := range map[string]string{
		"expired":    hs256(secret, fmt.Sprintf(`{"sub":"bob","exp":%d}`, time.Now().Add(-time.Hour).Unix())),
		"bad secret": hs256([]byte("fedcba9876543210fedcba9876543210"), fmt.Sprintf(`{"sub":"bob","exp":%d}`, exp)),
	} {
		if r := get(t, c, s.url+"/", "Authorization", "Bearer "+bad); r.code != 401 {
			t.Errorf("%s token: %d, want 401", name, r.code)
		}
	}
}

// IPv6 clients can be limited per /64: two addresses of one /64 share a
// bucket.
func TestIPv6Prefix(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(baseConfig, "identity:\n", "identity:\n  ipv6_prefix: 64\n", 1)
	c, err := gateway.Parse("gw.yaml", []byte(strings.Replace(cfg, "api_keys_file: keys.txt", "", 1)))
	must(t, err)
	g, err := gateway.New(t.Context(), c, gateway.Options{})
	must(t, err)
	defer g.Close()
	h := g.Handler()
	var got []int
	for _, ip := range []string{"[2001:db8:1:2::1]:1", "[2001:db8:1:2::2]:1", "[2001:db8:1:2:ffff::3]:1", "[2001:db8:1:2::4]:1", "[2001:db8:1:3::1]:1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ip
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got = append(got, w.Code)
	}
	if fmt.Sprint(got) != "[200 200 200 429 200]" {
		t.Errorf("per /64: %v, want [200 200 200 429 200]", got)
	}
}
