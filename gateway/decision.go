package gateway

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// A decision endpoint proxies nothing: a proxy in front (nginx's
// auth_request, Traefik's ForwardAuth, Caddy's forward_auth, Envoy's
// ext_authz) asks it about each request before proxying it, and it
// answers 200 (admit) or the refusal. The request asked about, the
// original, is rebuilt from the proxy's forwarding headers (the
// DecisionProxy says which), believed only from identity.trusted_proxies,
// and then served exactly as a proxied request is: put in its canonical
// spelling (a path that is not clean is decided as its clean form, where a
// proxied one is redirected to it: the proxy forwards what it forwards),
// matched to a route by the same ServeMux, the caller resolved by the same
// resolver (its address from X-Forwarded-For), limited by the same
// middleware, refused by the same writer. Only what the upstream would do
// differs: an admitted request is answered 200 with the RateLimit headers
// and the identity headers the upstream would have received
// (forward_user_header, forward_tier_header, forward_kind_header), for
// the proxy to copy to the request it proxies.

// decider answers the decision requests of a listener (all of them, or
// those to decision.path) from mux, the routes built with the decision
// answer in place of the upstream; it hands every other request to next.
type decider struct {
	dc      *DecisionConfig
	cfg     *Config
	mux     http.Handler
	next    http.Handler
	trusted func(remoteAddr string) bool
}

func (g *Gateway) decisions(cfg *Config, mux, next http.Handler) http.Handler {
	if cfg.Decision == nil {
		return next
	}
	trusted := cfg.Identity.TrustedProxies
	return &decider{dc: cfg.Decision, cfg: cfg, mux: mux, next: next,
		trusted: func(a string) bool { return peerTrusted(a, trusted) }}
}

func (h *decider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outer, ok := h.endpoint(r)
	if !ok {
		h.next.ServeHTTP(w, r)
		return
	}
	if !h.trusted(r.RemoteAddr) {
		// Whoever else asks could name any request and any client: it is
		// told nothing, and nothing is charged.
		problem(w, http.StatusForbidden, "decision requests are answered for identity.trusted_proxies only")
		return
	}
	if h.dc.Proxy == DecideNginx || h.dc.Proxy == DecideIngressNginx {
		w = &authRequestWriter{ResponseWriter: w}
	}
	r2, detail := h.original(r, outer)
	if r2 == nil {
		problem(w, http.StatusBadRequest, detail)
		return
	}
	if canonical(w, r2, true) {
		h.mux.ServeHTTP(w, r2)
	}
}

// endpoint reports whether r is a decision request, and the request
// target the proxy asked about when the proxy is Envoy (r's own, after
// the path prefix).
func (h *decider) endpoint(r *http.Request) (string, bool) {
	p := h.dc.Path
	if p == "" {
		return r.RequestURI, true
	}
	if h.dc.Proxy != DecideEnvoy {
		return "", r.URL.Path == p
	}
	rest, ok := strings.CutPrefix(r.RequestURI, p)
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", false
	}
	return rest, true
}

// original rebuilds the request the proxy asks about from r, or returns
// why it cannot. Each forwarding header must be there exactly once: a
// second value is a client's, passed on by a proxy that appends, and
// either could be believed.
func (h *decider) original(r *http.Request, envoyTarget string) (*http.Request, string) {
	var method, target, host string
	var missing string
	one := func(name string) string {
		vs := r.Header[name]
		if len(vs) != 1 || vs[0] == "" {
			if missing == "" {
				missing = name
			}
			return ""
		}
		return vs[0]
	}
	switch h.dc.Proxy {
	case DecideNginx:
		method, target, host = one("X-Original-Method"), one("X-Original-Uri"), r.Host
	case DecideIngressNginx:
		method = one("X-Original-Method")
		if raw := one("X-Original-Url"); raw != "" {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, "X-Original-URL is not an absolute http(s) URL"
			}
			host, target = u.Host, "/"
			if _, rest, _ := strings.Cut(raw, "://"); strings.IndexAny(rest, "/?") >= 0 {
				target = rest[strings.IndexAny(rest, "/?"):]
			}
			if target[0] == '?' {
				target = "/" + target
			}
		}
	case DecideForwarded:
		method, target, host = one("X-Forwarded-Method"), one("X-Forwarded-Uri"), one("X-Forwarded-Host")
	case DecideEnvoy:
		method, target, host = r.Method, envoyTarget, r.Host
	}
	if missing != "" {
		return nil, "the proxy must send one " + missing + " header (" + h.dc.Proxy.String() + " decision requests; see docs/proxies.md)"
	}
	if !httpguts.ValidHeaderFieldName(method) { // a method is a token
		return nil, "the original method " + strconv.Quote(method) + " is not an HTTP method"
	}
	if !strings.HasPrefix(target, "/") {
		return nil, "the original request target must be a path, got " + strconv.Quote(target)
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, "the original request target is not a URI: " + strconv.Quote(target)
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.Method, r2.URL, r2.RequestURI, r2.Host = method, u, target, host
	r2.Body, r2.ContentLength, r2.GetBody = http.NoBody, 0, nil
	return r2, ""
}

// decisionAnswer is the decision endpoint's upstream: the request was
// admitted, so it answers 200 (Envoy admits on 200 only) with no body,
// the RateLimit headers the middleware set, and the identity headers,
// each of them present, empty when unknown (an anonymous caller's user):
// a proxy that copies them to the request it proxies (Traefik's
// authResponseHeaders, Caddy's copy_headers, Envoy's
// allowed_upstream_headers) then replaces the client's own copy.
func decisionAnswer(ih *identityHeaders) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		ih.set(h, r.Context())
		for _, name := range [...]string{ih.user, ih.tier, ih.kind} {
			if _, ok := h[name]; !ok && name != "" {
				h[name] = []string{""}
			}
		}
		h["Content-Length"] = []string{"0"}
		w.WriteHeader(http.StatusOK)
	})
}

// authRequestWriter passes on what nginx's auth_request passes on (2xx,
// 401, 403) and turns every other status (429, 503, 400, 404) into 403
// with the status in X-Sluice-Status: auth_request_set reads it and the
// other headers, and error_page 403 answers the client with it (see
// examples/nginx). The body stays; nginx drops it.
type authRequestWriter struct {
	http.ResponseWriter
	wrote bool
}

// DecisionStatusHeader carries the status of a refusal that nginx's
// auth_request would not pass on.
const DecisionStatusHeader = "X-Sluice-Status"

func (w *authRequestWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if code >= 300 && code != http.StatusUnauthorized && code != http.StatusForbidden {
			w.Header()[DecisionStatusHeader] = []string{strconv.Itoa(code)}
			code = http.StatusForbidden
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *authRequestWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *authRequestWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// decisionMux returns the route table of decision requests, empty but for
// its answer to a request no route matches (404, as a proxied one), and
// the handler that answers an admitted one; nil, nil without decision.
// The gateway registers every route on it (build), deciding.
func decisionMux(cfg *Config, ih *identityHeaders) (*http.ServeMux, http.Handler) {
	if cfg.Decision == nil {
		return nil, nil
	}
	mux := http.NewServeMux()
	for _, ps := range routePatterns(cfg.Routes) {
		for _, p := range ps {
			if p == "/" {
				return mux, decisionAnswer(ih)
			}
		}
	}
	mux.HandleFunc("/", noRoute)
	return mux, decisionAnswer(ih)
}

// addDecisionRoute registers rt's route on the decision route table mux
// at patterns, with limited (its limits, then the decision's answer) in
// place of its limits and upstream.
func addDecisionRoute(mux *http.ServeMux, rt *routeHandler, limited http.Handler, patterns []string) {
	dt := *rt
	dt.limited = limited
	for _, p := range patterns {
		mux.Handle(p, &dt)
	}
}
