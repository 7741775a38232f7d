package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/httplimit"
)

// The route table is an http.ServeMux: it matches the cleaned path
// segment by segment (so "/api" is not a prefix of "/apix"), a GET
// pattern also matches HEAD, and the most specific pattern wins. Before
// the mux, every request is put in one canonical spelling (canonicalize),
// so that whatever the mux matched is exactly what the upstream receives:
//
//   - a path with an encoded slash or backslash (%2F, %5C), a backslash,
//     or a control character is refused with 400: an upstream may decode
//     it into a separator, and the gateway cannot know which;
//   - a path that is not clean (empty, "//", "." or ".." segments, also
//     percent-encoded as %2E) is redirected (307, as ServeMux does) to its
//     cleaned form, and is never proxied: the client must come back with
//     the canonical path, which is limited;
//   - a path that is not UTF-8 once decoded (an overlong "%C0%AF") is
//     refused with 400 as well;
//   - other percent-encodings are matched decoded ("/%73earch" is
//     "/search") and proxied in Go's escaping ("/search"), except in a
//     path with sub-delimiters ("!$&'()*+,;=:@"), whose escaping may mean
//     something to the upstream: that one is proxied as the client wrote
//     it, which decodes to the same path;
//   - a standard method in any case ("get") is the upper-case method;
//   - the host is matched in lower case, without a trailing dot or port;
//   - CONNECT is answered 405: the gateway is not a forward proxy.

// routePatterns returns the ServeMux patterns of each route. A route
// with Pattern is that pattern. Otherwise each method (or none) and Host
// are combined with Path, and with Path+"/" when Path does not end in a
// slash or a trailing wildcard: that implicit subtree is left out when
// another route names the same host and subtree explicitly for the same
// method or for every method (as when paths were prefixes, the longer
// explicit path wins).
func routePatterns(routes []Route) [][]string {
	type key struct{ method, host, path string }
	explicit := map[key]bool{}
	for _, r := range routes {
		if r.Pattern != "" {
			m, h, p := splitPattern(r.Pattern)
			explicit[key{m, strings.ToLower(h), p}] = true
			continue
		}
		for _, m := range methodsOrAny(r.Methods) {
			explicit[key{m, strings.ToLower(r.Host), r.Path}] = true
		}
	}
	out := make([][]string, len(routes))
	for i, r := range routes {
		if r.Pattern != "" {
			m, h, p := splitPattern(r.Pattern)
			out[i] = []string{joinPattern(m, strings.ToLower(h), p)}
			continue
		}
		host := strings.ToLower(strings.TrimSuffix(r.Host, "."))
		subtree := !strings.HasSuffix(r.Path, "/") && !strings.HasSuffix(r.Path, "...}") && !strings.HasSuffix(r.Path, "{$}")
		for _, m := range methodsOrAny(r.Methods) {
			out[i] = append(out[i], joinPattern(m, host, r.Path))
			if subtree && !explicit[key{m, host, r.Path + "/"}] && !explicit[key{"", host, r.Path + "/"}] {
				out[i] = append(out[i], joinPattern(m, host, r.Path+"/"))
			}
		}
	}
	return out
}

func methodsOrAny(ms []string) []string {
	if len(ms) == 0 {
		return []string{""}
	}
	return ms
}

// splitPattern splits a ServeMux pattern into method, host and path, as
// ServeMux reads it.
func splitPattern(s string) (method, host, p string) {
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		method, s = s[:i], strings.TrimLeft(s[i+1:], " \t")
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return method, s[:i], s[i:]
	}
	return method, s, ""
}

func joinPattern(method, host, p string) string {
	if method != "" {
		return method + " " + host + p
	}
	return host + p
}

// validPattern reports what is wrong with a route's pattern.
func validPattern(s string) error {
	m, h, p := splitPattern(s)
	if p == "" || !strings.HasPrefix(p, "/") {
		return fmt.Errorf("want a ServeMux pattern \"[METHOD ][HOST]/PATH\", got %q", s)
	}
	if m == http.MethodConnect {
		return errors.New("CONNECT is not proxied (the gateway answers it 405)")
	}
	if m != "" && !methods[m] {
		return fmt.Errorf("unknown HTTP method %q (methods are upper case)", m)
	}
	if h != "" {
		if err := validHost(h); err != nil {
			return err
		}
	}
	return register(http.NewServeMux(), joinPattern(m, strings.ToLower(h), p), nil)
}

// validHost reports what is wrong with a route's host.
func validHost(h string) error {
	if h == "" || strings.ContainsAny(h, ":[]/ \t{}") {
		return fmt.Errorf("want a host name without port, such as example.com, got %q", h)
	}
	return nil
}

// register registers pattern on mux (with a handler that answers 404
// when h is nil), turning ServeMux's panic (a bad pattern, a conflict)
// into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	if h == nil {
		h = http.NotFoundHandler()
	}
	mux.Handle(pattern, h)
	return nil
}

// conflictRE finds the other pattern in ServeMux's conflict message.
var conflictRE = regexp.MustCompile(`conflicts with pattern "([^"]*)"[^:]*:\n?(.*)`)

type routeProblem struct {
	route int
	msg   string
}

// checkRoutes registers every route's patterns on a scratch ServeMux and
// reports bad patterns and conflicts (two patterns that match some
// request with neither more specific, such as the same path twice).
func checkRoutes(routes []Route) []routeProblem {
	var out []routeProblem
	mux := http.NewServeMux()
	owner := map[string]int{}
	for i, ps := range routePatterns(routes) {
		for _, p := range ps {
			err := register(mux, p, nil)
			if err == nil {
				owner[p] = i
				continue
			}
			msg := err.Error()
			if m := conflictRE.FindStringSubmatch(msg); m != nil {
				if j, ok := owner[m[1]]; ok {
					msg = fmt.Sprintf("pattern %q conflicts with routes[%d] (%q): %s", p, j, m[1], strings.TrimSpace(m[2]))
				}
			}
			out = append(out, routeProblem{i, msg})
		}
	}
	return out
}

// canonicalize puts r in its canonical spelling, or answers it: it
// returns false when it has written a response (400, 405, a redirect to
// the clean path). See the comment at the top of this file.
func canonicalize(w http.ResponseWriter, r *http.Request) bool { return canonical(w, r, false) }

// canonical is canonicalize; decide cleans a path that is not clean in
// place of the redirect: a decision request's original (decision.go) is
// proxied as its proxy forwards it, so it is decided as what it cleans to.
func canonical(w http.ResponseWriter, r *http.Request, decide bool) bool {
	if !methods[r.Method] {
		if m := strings.ToUpper(r.Method); methods[m] {
			r.Method = m
		}
	}
	if r.Method == http.MethodConnect {
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE")
		problem(w, http.StatusMethodNotAllowed, "CONNECT is not supported: this is a reverse proxy")
		return false
	}
	if h := r.Host; h != "" && needsHostCanon(h) {
		r.Host = canonHost(h)
	}
	p := r.URL.Path
	if p != "" && p[0] != '/' {
		problem(w, http.StatusBadRequest, "the request target must be a path")
		return false
	}
	if containsFold(r.URL.RawPath, "%2f") || containsFold(r.URL.RawPath, "%5c") {
		problem(w, http.StatusBadRequest, "an encoded / or \\ (%2F, %5C) in the path is refused: the upstream could read it as a separator")
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '\\' || c < 0x20 || c == 0x7f {
			problem(w, http.StatusBadRequest, "a backslash or control character in the path is refused")
			return false
		}
	}
	if !utf8.ValidString(p) {
		problem(w, http.StatusBadRequest, "a path that is not UTF-8 once decoded is refused (%C0%AF is not a slash)")
		return false
	}
	if clean := cleanPath(p); clean != p && decide {
		r.URL.Path, r.URL.RawPath = clean, ""
	} else if clean != p {
		u := &url.URL{Path: clean, RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.String(), http.StatusTemporaryRedirect)
		return false
	}
	// Proxy the path as matched, in Go's escaping, unless it has
	// characters whose escaping may mean something to the upstream
	// ("%3B" is data, ";" starts Tomcat's path parameters): then the
	// client's escaping is kept, which decodes to the same path.
	if r.URL.RawPath != "" && !strings.ContainsAny(p, "!$&'()*+,;=:@") {
		r.URL.RawPath = ""
	}
	return true
}

// needsHostCanon reports whether h has upper case letters or a trailing
// dot before its port.
func needsHostCanon(h string) bool {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return strings.HasSuffix(hostOnly(h), ".")
}

// canonHost lower-cases h (ASCII only) and drops the trailing dots of
// its name.
func canonHost(h string) string {
	b := []byte(h)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	h = string(b)
	name := hostOnly(h)
	if strings.HasSuffix(name, ".") {
		h = strings.TrimRight(name, ".") + h[len(name):]
	}
	return h
}

// hostOnly returns h without its port.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i]
	}
	return h
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// cleanPath is ServeMux's: path.Clean, keeping a trailing slash; "" is
// "/".
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		np += "/"
	}
	return np
}

// problem writes an application/problem+json answer.
func problem(w http.ResponseWriter, status int, detail string) {
	httplimit.WriteProblem(w, httplimit.Problem{Status: status, Detail: detail})
}
