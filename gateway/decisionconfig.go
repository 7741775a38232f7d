package gateway

import (
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// DecisionProxy is the proxy in front of a decision endpoint: how it
// describes the request it asks about, and how it passes a refusal on to
// its client.
type DecisionProxy uint8

const (
	// DecideNginx is nginx's auth_request: the original method in
	// X-Original-Method, the request target in X-Original-URI, the host
	// in Host (the example config sets all three). nginx passes on only
	// 2xx, 401 and 403, so any other refusal is answered 403 with the
	// status in X-Sluice-Status, for error_page to turn back into it.
	DecideNginx DecisionProxy = iota + 1
	// DecideIngressNginx is ingress-nginx's auth-url: X-Original-Method
	// and the absolute X-Original-URL; refusals as DecideNginx.
	DecideIngressNginx
	// DecideForwarded is Traefik's ForwardAuth and Caddy's forward_auth:
	// X-Forwarded-Method, X-Forwarded-Uri and X-Forwarded-Host. Both
	// pass a refusal to the client as it is (status, headers, body).
	DecideForwarded
	// DecideEnvoy is Envoy's ext_authz filter with an http_service: the
	// decision request is the original request itself (its method, its
	// Host, its path after the path_prefix, decision.path). Envoy passes a
	// refusal to the client as it is, and admits on 200 only.
	DecideEnvoy
)

// decisionProxies are the proxies' names, as String gives them; traefik
// and caddy are also read as forwarded.
var decisionProxies = [...]string{DecideNginx: "nginx", DecideIngressNginx: "ingress-nginx", DecideForwarded: "forwarded", DecideEnvoy: "envoy"}

func parseDecisionProxy(s string) DecisionProxy {
	if s == "traefik" || s == "caddy" {
		s = "forwarded"
	}
	for p, n := range decisionProxies {
		if n == s && n != "" {
			return DecisionProxy(p)
		}
	}
	return 0
}

// String returns nginx, ingress-nginx, forwarded or envoy.
func (p DecisionProxy) String() string {
	if int(p) < len(decisionProxies) && p != 0 {
		return decisionProxies[p]
	}
	return fmt.Sprintf("DecisionProxy(%d)", uint8(p))
}

// DecisionConfig is the decision section: the public listener answers
// the proxy in front instead of proxying (see decision.go).
type DecisionConfig struct {
	// Proxy (proxy) is the proxy asking: nginx, ingress-nginx, forwarded
	// (also spelled traefik or caddy) or envoy.
	Proxy DecisionProxy
	// Path (path), when set, is the decision endpoint on a listener that
	// proxies every other request (for envoy, the path_prefix in front of
	// the original path). Empty: every request of the listener is a
	// decision request, and there is no upstream.
	Path string
	line int
}

// All reports whether every request of the listener is a decision request.
func (dc *DecisionConfig) All() bool { return dc != nil && dc.Path == "" }

func (t *top) decision(v *yaml.Node) {
	dc := &DecisionConfig{line: v.Line}
	d := t.d
	d.fields(v, "decision", map[string]func(k, v *yaml.Node){
		"proxy": func(k, v *yaml.Node) {
			s := d.str(v, "decision.proxy")
			if dc.Proxy = parseDecisionProxy(s); dc.Proxy == 0 {
				d.add(v.Line, "decision.proxy", "want nginx, ingress-nginx, forwarded (Traefik, Caddy) or envoy, got %s", yamlnode.Kind(v))
			}
		},
		"path": func(k, v *yaml.Node) {
			dc.Path = d.str(v, "decision.path")
			if !strings.HasPrefix(dc.Path, "/") || strings.ContainsAny(dc.Path, " {}?#%") || path.Clean(dc.Path) != dc.Path || dc.Path == "/" {
				d.add(v.Line, "decision.path", "want a clean absolute path such as /_sluice/decide, got %q", dc.Path)
			}
		},
	})
	if dc.Proxy == 0 && v.Kind == yaml.MappingNode && mappingValue(v, "proxy") == nil {
		d.add(v.Line, "decision.proxy", "missing proxy (nginx, ingress-nginx, forwarded or envoy): it says how the original request is described")
	}
	t.c.Decision = dc
}

// checkDecision refuses what a decision endpoint cannot do: it never
// sees the end of the request it decides (so no in-flight cap, no
// adaptive limit, no utilization shedding, no refund of a failed
// response), it believes forwarding headers from trusted proxies only
// (so it needs some), and it has no upstream of its own when the whole
// listener decides.
func (t *top) checkDecision() {
	dc, c, d := t.c.Decision, t.c, t.d
	if dc == nil {
		return
	}
	if len(c.Identity.TrustedProxies) == 0 {
		d.add(dc.line, "decision", "a decision endpoint believes the original request only from identity.trusted_proxies: list the proxy's addresses there")
	}
	never := "a decision endpoint never sees the end of the request it decides"
	if c.InFlight != nil {
		d.add(lineIn(t.root, "in_flight"), "in_flight", "%s, so it cannot count requests in flight: remove in_flight (or serve the route as a proxy)", never)
	}
	if c.Shedding != nil {
		d.add(lineIn(t.root, "shedding"), "shedding", "%s, so it cannot measure the requests in flight that shedding needs: remove shedding", never)
	}
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		if r.InFlight != nil && r.InFlight.Max > 0 {
			d.add(lineIn(t.root, p+".in_flight"), p+".in_flight", "%s, so it cannot count requests in flight: remove in_flight", never)
		}
		if r.Adaptive != nil {
			d.add(lineIn(t.root, p+".adaptive"), p+".adaptive", "%s, so it cannot measure the upstream's latency: remove adaptive", never)
		}
		if len(r.RefundOn) > 0 || r.RefundOnGateway != 0 {
			d.add(lineIn(t.root, p+".refund_on"), p+".refund_on", "%s, nor its status, so nothing can be refunded: remove refund_on", never)
		}
	}
	if !dc.All() {
		return
	}
	if c.Upstream != "" {
		d.add(lineIn(t.root, "upstream"), "upstream", "the whole listener decides (decision without path), so nothing is proxied: remove upstream, or give decision a path")
	}
	if c.RateLimitEndpoint != "" {
		d.add(lineIn(t.root, "rate_limit_endpoint"), "rate_limit_endpoint", "the whole listener decides (decision without path), and a proxy does not pass an admitted decision's body to its client: give decision a path to serve it")
	}
}
