package gateway

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestRoutePatterns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		routes []Route
		want   string
	}{
		{[]Route{{Path: "/search"}}, "[[/search /search/]]"},
		{[]Route{{Path: "/v1/"}}, "[[/v1/]]"},
		{[]Route{{Path: "/"}}, "[[/]]"},
		{[]Route{{Path: "/x", Methods: []string{"GET", "POST"}}}, "[[GET /x GET /x/ POST /x POST /x/]]"},
		{[]Route{{Path: "/x", Host: "Example.COM."}}, "[[example.com/x example.com/x/]]"},
		{[]Route{{Pattern: "GET Example.com/api/"}}, "[[GET example.com/api/]]"},
		{[]Route{{Pattern: "/exact"}}, "[[/exact]]"},
		{[]Route{{Path: "/users/{id}"}}, "[[/users/{id} /users/{id}/]]"},
		{[]Route{{Path: "/files/{p...}"}}, "[[/files/{p...}]]"},
		{[]Route{{Path: "/items/{$}"}}, "[[/items/{$}]]"},
		// An explicit subtree takes over the implicit one, as the longer
		// prefix did; only for the methods it covers.
		{[]Route{{Path: "/search"}, {Path: "/search/"}}, "[[/search] [/search/]]"},
		{[]Route{{Path: "/search", Methods: []string{"GET"}}, {Path: "/search/"}}, "[[GET /search] [/search/]]"},
		{[]Route{{Path: "/search", Methods: []string{"GET"}}, {Path: "/search/", Methods: []string{"POST"}}}, "[[GET /search GET /search/] [POST /search/]]"},
	} {
		if got := fmt.Sprint(routePatterns(tc.routes)); got != tc.want {
			t.Errorf("routePatterns(%+v) = %s, want %s", tc.routes, got, tc.want)
		}
	}
}

func TestCheckRoutes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		routes []Route
		want   string // "" no problem
	}{
		{[]Route{{Path: "/a"}, {Path: "/b"}, {Path: "/"}}, ""},
		{[]Route{{Path: "/a", Methods: []string{"GET"}}, {Path: "/a"}}, ""},
		{[]Route{{Path: "/a"}, {Path: "/a"}}, `routes[1]: pattern "/a" conflicts with routes[0] ("/a")`},
		{[]Route{{Pattern: "/a/{x}/c"}, {Pattern: "/a/b/{y}"}}, `routes[1]: pattern "/a/b/{y}" conflicts with routes[0] ("/a/{x}/c")`},
		{[]Route{{Pattern: "GET /a/"}, {Path: "/a/", Methods: []string{"GET"}}}, `routes[1]: pattern "GET /a/" conflicts with routes[0]`},
	} {
		var got []string
		for _, p := range checkRoutes(tc.routes) {
			got = append(got, fmt.Sprintf("routes[%d]: %s", p.route, p.msg))
		}
		s := strings.Join(got, "\n")
		if (tc.want == "") != (s == "") || !strings.Contains(s, tc.want) {
			t.Errorf("checkRoutes(%+v) = %q, want %q", tc.routes, s, tc.want)
		}
	}
}

func TestCanonHost(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"example.com": "example.com", "EXAMPLE.com": "example.com", "example.com.": "example.com",
		"Example.Com.:8080": "example.com:8080", "[::1]:80": "[::1]:80", "[FE80::1]": "[fe80::1]",
	} {
		if got := canonHost(in); got != want {
			t.Errorf("canonHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever request target canonicalize lets through is clean, has no
// separator an upstream could decode differently, and is proxied as a
// path that decodes to exactly what the mux matched.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{"/x", "//x", "/./x", "/y/../x", "/y/%2e%2e/x", "/%2Fx", "/x%5c", `/a\b`, "/%73earch",
		"/a%3Bb", "/%c0%af", "/x/", "http://h/x", "*", "/a;b/../c", "/%25%32%65"} {
		f.Add("GET", s, "Example.COM.")
	}
	f.Fuzz(func(t *testing.T, method, target, host string) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")))
		if err != nil {
			return
		}
		w := httptest.NewRecorder()
		if !canonicalize(w, r) {
			if w.Code != 307 && w.Code != 400 && w.Code != 405 {
				t.Fatalf("%s %q: answered %d", method, target, w.Code)
			}
			return
		}
		p := r.URL.Path
		if cleanPath(p) != p || strings.Contains(p, `\`) {
			t.Fatalf("%s %q: path %q let through, not clean", method, target, p)
		}
		esc := r.URL.EscapedPath()
		if containsFold(esc, "%2f") || containsFold(esc, "%5c") {
			t.Fatalf("%s %q: proxied as %q", method, target, esc)
		}
		if dec, err := url.PathUnescape(esc); err != nil || dec != p {
			t.Fatalf("%s %q: proxied as %q, which decodes to %q, not the matched %q", method, target, esc, dec, p)
		}
		if strings.ContainsAny(r.Host, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") || strings.HasSuffix(hostOnly(r.Host), ".") {
			t.Fatalf("host %q let through as %q", host, r.Host)
		}
	})
}
