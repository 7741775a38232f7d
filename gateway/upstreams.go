package gateway

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/didyoumean"
	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/internal/redact"
)

// Several services can sit behind one gateway: upstreams names each, and
// a route's upstream says which one its requests go to (the top-level
// upstream without). Each upstream has a connection pool of its own (a
// Transport, idle_connections keep-alive connections), a timeout of its
// own (a route's upstream_timeout still wins), and a health that /readyz
// shows: an upstream the proxy could not reach (or that did not answer in
// time) is "unreachable since" its first failure in a row, until the next
// response from it. Health is passive: it follows the requests proxied,
// and sends none of its own. A reload keeps the pool and the health of an
// upstream whose name, URL and idle_connections did not change.

// UpstreamConfig is one entry of upstreams.
type UpstreamConfig struct {
	Name string // name: what routes call it (route's upstream)
	URL  string // url: http:// or https:// URL, or builtin:echo
	// Timeout (timeout) bounds a request to this upstream, unless its
	// route's upstream_timeout says otherwise; default the top-level
	// upstream_timeout.
	Timeout time.Duration
	// IdleConnections (idle_connections) is the keep-alive connections to
	// this upstream kept for reuse; default upstream_idle_connections.
	IdleConnections int
}

// upstreamNameRE is what an upstream's name may be: it is logged and
// shown on /readyz.
var upstreamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// upstreamURL reads an upstream's URL: http, https or builtin:echo.
func (d *decoder) upstreamURL(v *yaml.Node, path string) string {
	s := d.str(v, path)
	if s == BuiltinEcho {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.add(v.Line, path, "want an http:// or https:// URL or %s, got %q", BuiltinEcho, redact.URL(s))
	}
	return s
}

// upstreams decodes the upstreams section. The timeouts and pools left
// out are filled in by upstreamDefaults, once the top level is read.
func (t *top) upstreams(n *yaml.Node) {
	d := t.d
	seen := map[string]bool{}
	d.list(n, "upstreams", func(_ int, v *yaml.Node, path string) {
		var u UpstreamConfig
		d.fields(v, path, map[string]func(k, v *yaml.Node){
			"name": func(k, v *yaml.Node) {
				u.Name = d.str(v, yamlnode.Join(path, "name"))
				switch {
				case !upstreamNameRE.MatchString(u.Name):
					d.add(v.Line, yamlnode.Join(path, "name"), "want a name of letters, digits, '_', '.' and '-' (up to 64), got %q", u.Name)
				case seen[u.Name]:
					d.add(v.Line, yamlnode.Join(path, "name"), "upstream %q is named twice", u.Name)
				}
				seen[u.Name] = true
			},
			"url":     func(k, v *yaml.Node) { u.URL = d.upstreamURL(v, yamlnode.Join(path, "url")) },
			"timeout": func(k, v *yaml.Node) { u.Timeout = d.duration(v, yamlnode.Join(path, "timeout")) },
			"idle_connections": func(k, v *yaml.Node) {
				u.IdleConnections = int(d.integer(v, yamlnode.Join(path, "idle_connections"), 1, 1<<16))
			},
		})
		if u.Name == "" {
			d.add(v.Line, yamlnode.Join(path, "name"), "missing name")
		}
		if u.URL == "" {
			d.add(v.Line, yamlnode.Join(path, "url"), "missing url (an http:// or https:// URL, or %s)", BuiltinEcho)
		}
		t.c.Upstreams = append(t.c.Upstreams, u)
	})
}

// upstreamDefaults fills the upstreams' timeouts and pools from the top
// level's.
func (t *top) upstreamDefaults() {
	for i := range t.c.Upstreams {
		u := &t.c.Upstreams[i]
		u.Timeout = cmp.Or(u.Timeout, t.c.UpstreamTimeout)
		u.IdleConnections = cmp.Or(u.IdleConnections, t.c.UpstreamIdleConnections)
	}
}

// upstream returns the upstream named name, or nil.
func (c *Config) upstream(name string) *UpstreamConfig {
	if name == "" {
		return nil
	}
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}

// routeUpstream checks the route's upstream (a name in upstreams, or
// none: the top-level upstream) and fills its timeout: the route's own,
// else its upstream's, else the top level's.
func (d *decoder) routeUpstream(r *Route, line int, path string, c *Config) {
	timeout := c.UpstreamTimeout
	switch u := c.upstream(r.Upstream); {
	case u != nil:
		timeout = cmp.Or(u.Timeout, timeout)
	case r.Upstream != "":
		names := make([]string, len(c.Upstreams))
		for i, u := range c.Upstreams {
			names[i] = u.Name
		}
		msg := fmt.Sprintf("no upstream named %q in upstreams", r.Upstream)
		if len(names) == 0 {
			msg += " (there is no upstreams section)"
		} else if s := didyoumean.Closest(r.Upstream, names); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		d.add(line, yamlnode.Join(path, "upstream"), "%s", msg)
	case c.Upstream == "" && len(c.Upstreams) > 0:
		d.add(line, yamlnode.Join(path, "upstream"), "the route names no upstream and there is no top-level upstream: name one of upstreams")
	}
	if r.UpstreamTimeout == 0 {
		r.UpstreamTimeout = timeout
	}
}

// upstreamLink is one upstream as served: its handler (a reverse proxy
// over its own Transport, or the echo API) and its health.
type upstreamLink struct {
	name    string // "" for the top-level upstream
	url     string
	idle    int
	echo    bool
	target  *url.URL
	tr      *http.Transport // nil for builtin:echo
	health  upstreamHealth
	handler http.Handler
}

// same reports whether l can serve u unchanged (across a reload).
func (l *upstreamLink) same(name, rawURL string, idle int) bool {
	return l.name == name && l.url == rawURL && l.idle == idle
}

// upstreamHealth is an upstream's passive health: failures in a row (the
// proxy's 502 and 504) since the last response, the first's time, and the
// last error.
type upstreamHealth struct {
	failures atomic.Int64
	since    atomic.Int64 // Unix nanoseconds of the first failure in the row
	last     atomic.Pointer[string]
}

// ok records a response from the upstream. It runs on every proxied
// response: one atomic load while the upstream is healthy.
func (h *upstreamHealth) ok() {
	if h.failures.Load() != 0 {
		h.failures.Store(0)
	}
}

// fail records a failure to reach the upstream, or to have its answer
// in time.
func (h *upstreamHealth) fail(now time.Time, err error) {
	if h.failures.Add(1) == 1 {
		h.since.Store(now.UnixNano())
	}
	msg := err.Error()
	h.last.Store(&msg)
}

// status is the upstream's line on /readyz.
func (l *upstreamLink) status() string {
	name := "upstream"
	if l.name != "" {
		name += " " + l.name
	}
	name += " " + redact.URL(l.url)
	n := l.health.failures.Load()
	if n == 0 {
		return name + ": ok"
	}
	since := time.Unix(0, l.health.since.Load()).UTC().Format(time.RFC3339)
	last := ""
	if p := l.health.last.Load(); p != nil {
		last = ": " + *p
	}
	return fmt.Sprintf("%s: unreachable since %s (%d failures in a row)%s", name, since, n, last)
}

// upstreamLinks returns the links of cfg's upstreams, the top-level one
// (when there is one) first and then those of upstreams in their order:
// the link of the serving config when it has the same name, URL and pool,
// otherwise a new one.
func (g *Gateway) upstreamLinks(cfg *Config) ([]*upstreamLink, error) {
	var old []*upstreamLink
	if st := g.cur.Load(); st != nil {
		old = st.upstreams
	}
	link := func(name, rawURL string, idle int) (*upstreamLink, error) {
		if i := slices.IndexFunc(old, func(l *upstreamLink) bool { return l.same(name, rawURL, idle) }); i >= 0 {
			return old[i], nil
		}
		l := &upstreamLink{name: name, url: rawURL, idle: idle, echo: rawURL == BuiltinEcho}
		if l.echo {
			return l, nil
		}
		target, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("gateway: upstream %s: %w", name, err)
		}
		l.target, l.tr = target, upstreamTransport(idle)
		return l, nil
	}
	var out []*upstreamLink
	if cfg.Upstream != "" {
		l, err := link("", cfg.Upstream, cfg.UpstreamIdleConnections)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	for _, u := range cfg.Upstreams {
		l, err := link(u.Name, u.URL, u.IdleConnections)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// routeUpstreams returns the links of cfg's upstreams (upstreamLinks)
// and, for each route, the handler its admitted requests go to: its
// upstream's proxy, bounded by the route's upstream_timeout, or the echo
// API.
func (g *Gateway) routeUpstreams(cfg *Config, ih *identityHeaders) ([]*upstreamLink, []http.Handler, error) {
	links, err := g.upstreamLinks(cfg)
	if err != nil {
		return nil, nil, err
	}
	handlers := make(map[string]http.Handler, len(links))
	for _, l := range links {
		handlers[l.name] = g.upstream(l, cfg, ih)
	}
	out := make([]http.Handler, len(cfg.Routes))
	for i, rc := range cfg.Routes {
		j := slices.IndexFunc(links, func(l *upstreamLink) bool { return l.name == rc.Upstream })
		switch {
		case j < 0 && rc.Upstream == "" && cfg.Decision.All():
			out[i] = http.HandlerFunc(noUpstream) // never proxied: every request is decided
			continue
		case j < 0:
			return nil, nil, fmt.Errorf("gateway: %s: routes[%d]: no upstream %q", cfg.File, i, rc.Upstream)
		}
		out[i] = handlers[rc.Upstream]
		if !links[j].echo {
			out[i] = withTimeout(out[i], rc.UpstreamTimeout)
		}
	}
	return links, out, nil
}

// closeUnused closes the idle connections of the links in old that are
// not in cur (a reload dropped or changed their upstream).
func closeUnused(old, cur []*upstreamLink) {
	for _, l := range old {
		if l.tr != nil && !slices.Contains(cur, l) {
			l.tr.CloseIdleConnections()
		}
	}
}

// upstreamsReady is the upstreams' lines on /readyz.
func upstreamsReady(links []*upstreamLink) string {
	var b strings.Builder
	for _, l := range links {
		b.WriteString(l.status())
		b.WriteByte('\n')
	}
	return b.String()
}

// modifyResponse is the proxy's ModifyResponse: a response, whatever its
// status, is the upstream reached.
func (l *upstreamLink) modifyResponse(*http.Response) error {
	l.health.ok()
	return nil
}

// upstreamTransport is an upstream's Transport, keeping up to idle
// keep-alive connections to it (idle_connections).
func upstreamTransport(idle int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep an idle upstream connection for every concurrent client
	// (net/http's default keeps 2, and a proxy with more clients than
	// that dials the upstream again for most requests).
	tr.MaxIdleConnsPerHost = cmp.Or(idle, DefaultUpstreamIdleConnections)
	tr.MaxIdleConns = tr.MaxIdleConnsPerHost
	// A proxy passes the client's Accept-Encoding through: the
	// Transport must not ask for gzip itself and then decompress the
	// answer to a client that did not ask for it.
	tr.DisableCompression = true
	return tr
}

// noUpstream answers for a route that has no upstream to proxy to.
func noUpstream(w http.ResponseWriter, r *http.Request) {
	problem(w, http.StatusBadGateway, "no upstream for this route")
}
