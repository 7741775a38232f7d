package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"
)

// hit is one request as the upstream received it.
type hit struct {
	method string
	uri    string // the request target, as sent
	host   string // X-Forwarded-Host: the host the client asked for
	header http.Header
}

// recorder is an upstream that records every request that reaches it.
type recorder struct {
	url  string
	mu   sync.Mutex
	hits []hit
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.hits = append(rec.hits, hit{r.Method, r.RequestURI, r.Header.Get("X-Forwarded-Host"), r.Header.Clone()})
		rec.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	rec.url = srv.URL
	return rec
}

func (rec *recorder) all() []hit {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]hit(nil), rec.hits...)
}

// rawRequest sends one request over a new connection exactly as given
// (request line and Host) and returns the status and Location.
func rawRequest(t *testing.T, addr, method, target, host string, hdr ...string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	_, err = io.WriteString(c, b.String())
	must(t, err)
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: strings.ToUpper(method)})
	must(t, err)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

// follow sends a request and follows the gateway's redirects, as a client
// would, and returns the final status.
func follow(t *testing.T, addr, method, target, host string) int {
	t.Helper()
	for range 4 {
		code, loc := rawRequest(t, addr, method, target, host)
		if code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect && code != http.StatusMovedPermanently {
			return code
		}
		u, err := url.Parse(loc)
		must(t, err)
		target = u.RequestURI()
	}
	t.Fatalf("%s %s (Host %s): a redirect loop", method, target, host)
	return 0
}

// normalize is what an upstream that forgives everything makes of a
// path: every escape decoded (%2F included), backslashes as slashes,
// dot segments and double slashes removed.
func normalize(p string) string {
	if q, err := url.PathUnescape(p); err == nil {
		p = q
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

func normHost(h string) string {
	h = strings.ToLower(h)
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	return strings.TrimSuffix(h, ".")
}

// canonical reports whether a request target's path is one an upstream
// cannot read differently from the gateway: no encoded separator, no
// backslash, and clean once decoded.
func canonical(target string) bool {
	p, _, _ := strings.Cut(target, "?")
	lp := strings.ToLower(p)
	if strings.Contains(lp, "%2f") || strings.Contains(lp, "%5c") || strings.Contains(p, `\`) {
		return false
	}
	q, err := url.PathUnescape(p)
	if err != nil || q == "" || q[0] != '/' {
		return false
	}
	np := path.Clean(q)
	if strings.HasSuffix(q, "/") && np != "/" {
		np += "/"
	}
	return np == q
}

const spellingConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: %s
routes:
  - pattern: /exact
    rate_limits: [{actions: [{generic_key: {descriptor_value: exact}}]}]
  - path: /api/
    rate_limits: [{actions: [{generic_key: {descriptor_value: subtree}}]}]
  - path: /search
    rate_limits: [{actions: [{generic_key: {descriptor_value: legacy}}]}]
  - path: /m
    methods: [GET]
    rate_limits: [{actions: [{generic_key: {descriptor_value: method}}]}]
  - path: /h
    host: example.com
    rate_limits: [{actions: [{generic_key: {descriptor_value: host}}]}]
  - pattern: GET example.com/hp/
    rate_limits: [{actions: [{generic_key: {descriptor_value: hostmethod}}]}]
  - path: /                       # everything else, unlimited: a misrouted spelling would get through here
rules:
  domain: t
  descriptors:
    - {key: generic_key, value: exact, rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 5}}
    - {key: generic_key, value: subtree, rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 5}}
    - {key: generic_key, value: legacy, rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 5}}
    - {key: generic_key, value: method, rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 5}}
    - {key: generic_key, value: host, rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 5}}
    - {key: generic_key, value: hostmethod, rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 5}}
`

type spelling struct{ method, target, host string }

// spellings returns the ways to write method and p (a path with at least
// one segment) for host that an upstream may take for the same request.
func spellings(method, p, host string) []spelling {
	rest := p[1:]                            // "api/z"
	first, tail, _ := strings.Cut(rest, "/") // "api", "z"
	var out []spelling
	add := func(m, target, h string) { out = append(out, spelling{m, target, h}) }
	for _, m := range []string{method, strings.ToLower(method), strings.ToUpper(method[:1]) + strings.ToLower(method[1:])} {
		add(m, p, host)
	}
	if method == "GET" {
		add("HEAD", p, host)
		add("head", p, host)
	}
	for _, t := range []string{
		"/" + p,             // //api/z
		"/./" + rest,        // /./api/z
		"/y/../" + rest,     // /y/../api/z
		"/y/%2e%2e/" + rest, // /y/%2e%2e/api/z
		"/y/%2E%2E/" + rest, //
		"/y/.%2e/" + rest,   //
		"/%2e/" + rest,      // /%2e/api/z
		"/y/..%2f" + rest,   // an encoded slash
		"/y/..%5c" + rest,   // an encoded backslash
		`/y/..\` + rest,     // a backslash
		fmt.Sprintf("/%%%02x", rest[0]) + rest[1:], // /%61pi/z
		fmt.Sprintf("/%%%02X", rest[0]) + rest[1:], // /%61pi/z
		p + "?q=1",  //
		p + "#frag", // a fragment in the request target
		p + "%23frag",
		p + ";param",                   // a path parameter: another path to the gateway
		"/y/%c0%ae%c0%ae/" + rest,      // overlong dots
		p + "/",                        // a trailing slash
		p + "//",                       //
		p + "/.",                       //
		p + "/x/..",                    //
		"http://" + host + p,           // absolute form
		"http://" + host + "/y/.." + p, //
	} {
		add(method, t, host)
	}
	if tail != "" {
		add(method, "/"+first+"%2F"+tail, host) // /api%2Fz
		add(method, "/"+first+"%2f"+tail, host)
		add(method, "/"+first+"//"+tail, host) // /api//z
		add(method, "/"+first+"/./"+tail, host)
	}
	add(method, "/"+first, host)     // /api (a subtree's root)
	add(method, "/"+first+"x", host) // /apix: another path
	if host == "example.com" {
		for _, h := range []string{"EXAMPLE.COM", "example.com.", "Example.Com:8080", "example.com.:80"} {
			add(method, p, h)
		}
		add(method, "http://example.com"+p, "other.test") // absolute form wins over Host
		add(method, "http://EXAMPLE.com."+p, "other.test")
	}
	return out
}

// No spelling of a request reaches a limited route's upstream more often
// than the route allows, and the upstream only ever sees canonical paths.
func TestRouteSpellings(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	s := start(t, "", fmt.Sprintf(spellingConfig, rec.url))
	addr := strings.TrimPrefix(s.url, "http://")
	for _, kind := range []struct {
		name            string
		method, p, host string
		inDomain        func(h hit) bool
	}{
		{"exact", "GET", "/exact", "gw.test", func(h hit) bool { return normalize(pathOf(h.uri)) == "/exact" }},
		{"subtree", "GET", "/api/z", "gw.test", func(h hit) bool { return under(pathOf(h.uri), "/api") }},
		{"legacy", "POST", "/search", "gw.test", func(h hit) bool { return under(pathOf(h.uri), "/search") }},
		{"legacy-subtree", "GET", "/search/deep", "gw.test", nil}, // shares legacy's budget, checked there
		{"method", "GET", "/m", "gw.test", func(h hit) bool {
			m := strings.ToUpper(h.method)
			return (m == "GET" || m == "HEAD") && under(pathOf(h.uri), "/m")
		}},
		{"host", "PUT", "/h", "example.com", func(h hit) bool { return normHost(h.host) == "example.com" && under(pathOf(h.uri), "/h") }},
		{"host+method", "GET", "/hp/z", "example.com", func(h hit) bool {
			m := strings.ToUpper(h.method)
			return (m == "GET" || m == "HEAD") && normHost(h.host) == "example.com" && under(pathOf(h.uri), "/hp")
		}},
	} {
		before := len(rec.all())
		var got []int
		for range 6 {
			got = append(got, follow(t, addr, kind.method, kind.p, kind.host))
		}
		want := "[200 200 200 200 200 429]"
		if kind.name == "legacy-subtree" {
			want = "[429 429 429 429 429 429]" // /search's budget is spent
		}
		if fmt.Sprint(got) != want {
			t.Errorf("%s: %s %s (Host %s) ×6: %v, want %s", kind.name, kind.method, kind.p, kind.host, got, want)
		}
		statuses := map[int]int{}
		for _, sp := range spellings(kind.method, kind.p, kind.host) {
			for range 10 {
				statuses[follow(t, addr, sp.method, sp.target, sp.host)]++
			}
		}
		if kind.inDomain == nil {
			continue
		}
		n := 0
		for _, h := range rec.all()[before:] {
			if kind.inDomain(h) {
				n++
			}
		}
		if n != 5 {
			t.Errorf("%s: the upstream got %d requests for %s %s (Host %s) in all spellings, want 5 (the limit); statuses %v",
				kind.name, n, kind.method, kind.p, kind.host, statuses)
		}
		t.Logf("%s: %d spellings ×10: statuses %v", kind.name, len(spellings(kind.method, kind.p, kind.host)), statuses)
	}
	bad := map[string]bool{}
	for _, h := range rec.all() {
		if !canonical(h.uri) && !bad[h.uri] {
			bad[h.uri] = true
			t.Errorf("the upstream received %s %s: not the canonical path the gateway matched", h.method, h.uri)
		}
	}
	// /apix is not /api's, /searchx not /search's: the catch-all took them.
	for _, p := range []string{"/apix", "/searchx", "/mx", "/exactx"} {
		if code := follow(t, addr, "GET", p, "gw.test"); code != 200 {
			t.Errorf("GET %s = %d, want 200 from the unlimited catch-all", p, code)
		}
	}
}

func pathOf(uri string) string {
	if u, err := url.ParseRequestURI(uri); err == nil && u.IsAbs() {
		uri = u.RequestURI()
	}
	p, _, _ := strings.Cut(uri, "?")
	return p
}

// under reports whether p, normalized, is root or below it.
func under(p, root string) bool {
	p = normalize(p)
	return p == root || strings.HasPrefix(p, root+"/")
}

// The gateway's own answers to non-canonical requests.
func TestNonCanonicalAnswers(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	s := start(t, "", fmt.Sprintf(spellingConfig, rec.url))
	addr := strings.TrimPrefix(s.url, "http://")
	for _, tc := range []struct {
		method, target string
		code           int
		loc            string
	}{
		{"GET", "//search", 307, "/search"},
		{"GET", "/./search?a=1", 307, "/search?a=1"},
		{"GET", "/y/../search", 307, "/search"},
		{"GET", "/y/%2e%2e/search", 307, "/search"},
		{"GET", "/api", 307, "/api/"},
		{"GET", "/api%2Fz", 400, ""},
		{"GET", "/api%5cz", 400, ""},
		{"GET", `/api\z`, 400, ""},
		{"GET", "/api/%00", 400, ""},
		{"CONNECT", "example.com:443", 405, ""},
		{"GET", "/api/%c0%af", 400, ""},  // not UTF-8: an overlong slash
		{"GET", "/%73earch", 200, ""},    // matched decoded; limited as /search
		{"GET", "/%61pi/a%3Bb", 200, ""}, // escaping kept: ";" may mean something upstream
	} {
		code, loc := rawRequest(t, addr, tc.method, tc.target, "gw.test")
		if code != tc.code || loc != tc.loc {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.target, code, loc, tc.code, tc.loc)
		}
	}
	var got []string
	for _, h := range rec.all() {
		got = append(got, h.uri)
	}
	if want := "[/search /%61pi/a%3Bb]"; fmt.Sprint(got) != want {
		t.Errorf("the upstream received %v, want %s", got, want)
	}
}
